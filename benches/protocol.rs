//! Throughput of one incoming line through the real protocol path (envelope parse, method
//! lookup, typed decode through the generated dispatch glue, handler, and the encode the
//! agent's own sending does), measured in the same run against an untyped
//! `serde_json::Value` round trip of the same bytes. The typed path must do real work: each
//! fixture is checked once before timing.

use std::future::{Future, ready};
use std::hint::black_box;
use std::sync::{Mutex, PoisonError};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::FutureExt;
use heron_protocol::runtime::decode_params;
use heron_protocol::{
    Agent, CancelNotification, Client, InitializeRequest, InitializeResponse, Method, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, RequestPermissionRequest, RequestPermissionResponse,
    RpcError, SessionNotification, StopReason, dispatch_agent_request, dispatch_client_notification,
};
use heron_rpc::envelope::{self, Message};

/// A streamed text chunk of the agent's answer, as an agent sends it mid-turn.
const AGENT_MESSAGE_CHUNK: &str = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_01JQ8Z6X3M4N5P7R9T2V4W6Y8A","update":{"sessionUpdate":"agent_message_chunk","messageId":"msg_01JQ8Z7B2C3D4E5F6G7H8J9K0L","content":{"type":"text","text":"I'll start by reading `src/rpc/connection.rs` to see how the reader hands requests to the dispatcher, then check the cancellation path."}}}}"#;

/// A finished tool call with text content and two locations.
const TOOL_CALL_UPDATE: &str = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_01JQ8Z6X3M4N5P7R9T2V4W6Y8A","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_7f3a9c2e","status":"completed","content":[{"type":"content","content":{"type":"text","text":"Found 3 matches for \"fn dispatch_request\" in 2 files."}}],"locations":[{"path":"/home/dev/heron/src/protocol/serve.rs","line":64},{"path":"/home/dev/heron/src/rpc/connection.rs","line":212}]}}}"#;

/// A user turn: a text block plus a link to a file.
const SESSION_PROMPT: &str = r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"sess_01JQ8Z6X3M4N5P7R9T2V4W6Y8A","prompt":[{"type":"text","text":"Why does a cancel that races the result sometimes look like two answers? Check the in-flight table."},{"type":"resource_link","uri":"file:///home/dev/heron/src/rpc/inflight.rs","name":"inflight.rs","mimeType":"text/x-rust","size":4821}]}}"#;

/// An agent whose prompt handler answers at once; every other method is unused.
struct BenchAgent;

#[allow(refining_impl_trait)] // concrete results, narrower than the trait on purpose
impl Agent for BenchAgent {
    fn initialize(
        &self,
        _params: InitializeRequest,
    ) -> impl Future<Output = Result<InitializeResponse, RpcError>> + Send + 'static {
        ready(Err(RpcError::method_not_found("initialize")))
    }

    fn session_cancel(
        &self,
        _params: CancelNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        ready(Ok(()))
    }

    fn session_new(
        &self,
        _params: NewSessionRequest,
    ) -> impl Future<Output = Result<NewSessionResponse, RpcError>> + Send + 'static {
        ready(Err(RpcError::method_not_found("session/new")))
    }

    fn session_prompt(
        &self,
        params: PromptRequest,
    ) -> impl Future<Output = Result<PromptResponse, RpcError>> + Send + 'static {
        // Keep the decoded request observable so the decode cannot be optimised away.
        black_box(&params);
        ready(Ok(PromptResponse { meta: None, stop_reason: StopReason::EndTurn }))
    }
}

/// An editor that keeps the last `session/update` it received, so the bench can encode
/// it again the way an agent would send it.
#[derive(Default)]
struct BenchClient {
    last_update: Mutex<Option<SessionNotification>>,
}

impl BenchClient {
    fn take_update(&self) -> Option<SessionNotification> {
        self.last_update.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

#[allow(refining_impl_trait)] // concrete results, narrower than the trait on purpose
impl Client for BenchClient {
    fn session_request_permission(
        &self,
        _params: RequestPermissionRequest,
    ) -> impl Future<Output = Result<RequestPermissionResponse, RpcError>> + Send + 'static {
        ready(Err(RpcError::method_not_found("session/request_permission")))
    }

    fn session_update(
        &self,
        params: SessionNotification,
    ) -> impl Future<Output = Result<(), RpcError>> + Send + 'static {
        *self.last_update.lock().unwrap_or_else(PoisonError::into_inner) = Some(params);
        ready(Ok(()))
    }
}

/// Typed path for a notification: parse, look up, decode and handle through the generated
/// client dispatch, then encode the decoded notification as a new line.
fn typed_notification(client: &BenchClient, line: &str) -> String {
    let Ok(Message::Notification { method, params }) = envelope::parse(line) else {
        panic!("fixture is not a notification");
    };
    let found = Method::from_wire(&method).expect("known method");
    let running = dispatch_client_notification(client, found, params.as_deref()).expect("params decode");
    running.now_or_never().expect("handler is ready");
    let update = client.take_update().expect("handler saw the update");
    // As the agent sends it with validation off (the default): straight into the line.
    envelope::encode_notification_of(found.wire(), &update).expect("notification encodes")
}

/// Typed path for a request: parse, look up, decode and run through the generated agent
/// dispatch, then encode the response line.
fn typed_request(agent: &BenchAgent, line: &str) -> String {
    let Ok(Message::Request { id, method, params }) = envelope::parse(line) else {
        panic!("fixture is not a request");
    };
    let found = Method::from_wire(&method).expect("known method");
    let running = dispatch_agent_request(agent, found, params.as_deref()).expect("params decode");
    let result = running.now_or_never().expect("handler is ready");
    envelope::encode_response(&id, &result.result)
}

/// The baseline: the same bytes through `Value` and back, with no protocol knowledge.
fn untyped(line: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(line).expect("fixture is JSON");
    serde_json::to_string(&value).expect("value encodes")
}

fn as_value(line: &str) -> serde_json::Value {
    serde_json::from_str(line).expect("line is JSON")
}

fn protocol(c: &mut Criterion) {
    let client = BenchClient::default();
    let agent = BenchAgent;

    for (name, line) in [("agent_message_chunk", AGENT_MESSAGE_CHUNK), ("tool_call_update", TOOL_CALL_UPDATE)]
    {
        // A typed round trip that dropped or renamed a field would be faster for the wrong reason.
        assert_eq!(as_value(&typed_notification(&client, line)), as_value(line), "{name} round trip");
        let mut group = c.benchmark_group(format!("session_update/{name}"));
        group.throughput(Throughput::Bytes(line.len() as u64));
        group.bench_function("typed", |b| b.iter(|| typed_notification(&client, black_box(line))));
        group.bench_function("untyped", |b| b.iter(|| untyped(black_box(line))));
        group.finish();
    }

    assert_eq!(
        as_value(&typed_request(&agent, SESSION_PROMPT)),
        serde_json::json!({ "jsonrpc": "2.0", "id": 7, "result": { "stopReason": "end_turn" } }),
    );
    let mut group = c.benchmark_group("session_prompt");
    group.throughput(Throughput::Bytes(SESSION_PROMPT.len() as u64));
    group.bench_function("typed", |b| b.iter(|| typed_request(&agent, black_box(SESSION_PROMPT))));
    group.bench_function("untyped", |b| b.iter(|| untyped(black_box(SESSION_PROMPT))));
    group.finish();
}

/// Where the typed notification path spends its time, stage by stage, on the largest fixture.
fn typed_stages(c: &mut Criterion) {
    let Ok(Message::Notification { params: Some(params), .. }) = envelope::parse(TOOL_CALL_UPDATE) else {
        panic!("fixture is a notification with params");
    };
    let decoded: SessionNotification = decode_params(Some(&params)).expect("params decode");
    let mut group = c.benchmark_group("typed_stages/tool_call_update");
    group.bench_function("envelope_parse", |b| b.iter(|| envelope::parse(black_box(TOOL_CALL_UPDATE))));
    group.bench_function("decode_params", |b| {
        b.iter(|| decode_params::<SessionNotification>(Some(black_box(&params))))
    });
    group.bench_function("decode_without_path_tracking", |b| {
        b.iter(|| serde_json::from_str::<SessionNotification>(black_box(params.get())))
    });
    group.bench_function("encode", |b| {
        b.iter(|| envelope::encode_notification_of("session/update", black_box(&decoded)))
    });
    // The way a connection with a validator still encodes (params apart, then the line).
    group.bench_function("encode_through_raw_value", |b| {
        b.iter(|| {
            let encoded = serde_json::value::to_raw_value(black_box(&decoded)).expect("notification encodes");
            envelope::encode_notification("session/update", Some(&encoded))
        })
    });
    group.finish();
}

criterion_group!(benches, protocol, typed_stages);
criterion_main!(benches);
