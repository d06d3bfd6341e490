//! The OpenAI Responses provider against a loopback server speaking the Responses stream
//! format exactly (`event: <type>` and `data: {...}` lines): text, function calls in
//! pieces, reasoning carried to the next request, the server's errors without secrets,
//! usage, early ends, cancellation and the request's shape.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use heron_core::llm::http::HttpConfig;
use heron_core::llm::responses::ResponsesProvider;
use heron_core::llm::{
    ChatMessage, FinishReason, ModelEvent, ModelRequest, ModelStream, Provider, ProviderError, Reasoning,
    ToolCallRequest, ToolSpec, Usage, UserPart,
};
use heron_core::secret::Secret;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::support::server_mock::{Answer, MockServer};

const KEY: &str = "sk-responses-test-0123456789";

/// A Responses stream body: each event under its own type's name, as OpenAI sends it.
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|event| format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or("")))
        .collect()
}

fn text(delta: &str) -> Value {
    json!({ "type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": delta })
}

fn completed(usage: Value) -> Value {
    json!({ "type": "response.completed", "response": { "id": "resp_1", "status": "completed", "usage": usage } })
}

fn config(server: &MockServer) -> HttpConfig {
    HttpConfig {
        base_url: format!("{}/v1", server.origin),
        api_key: Some(Secret::new(KEY)),
        request_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(1),
        response_timeout: Duration::from_secs(60),
        max_retries: 1,
        retry_base_delay: Duration::from_millis(10),
        shape: Default::default(),
    }
}

fn provider(server: &MockServer) -> ResponsesProvider {
    ResponsesProvider::new(config(server)).expect("valid config")
}

/// A server that answers every request with this stream.
fn streaming(events: Vec<Value>) -> MockServer {
    let body = sse(&events);
    MockServer::start(move |_, _| Answer::Stream(body.clone()))
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "gpt-test".into(),
        messages: vec![
            ChatMessage::System { text: "Be brief.".into() },
            ChatMessage::User { parts: vec![UserPart::Text { text: "Hi".into() }] },
        ],
        tools: Vec::new(),
        effort: None,
        max_tokens: None,
    }
}

/// Runs a stream to its end: the events, then the error it ended with, if any.
async fn collect(mut stream: ModelStream) -> (Vec<ModelEvent>, Option<ProviderError>) {
    let mut events = Vec::new();
    while let Some(item) =
        tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("stream stalls")
    {
        match item {
            Ok(event) => events.push(event),
            Err(error) => {
                assert!(stream.next().await.is_none(), "nothing follows an error");
                return (events, Some(error));
            }
        }
    }
    (events, None)
}

fn calls(events: &[ModelEvent]) -> Vec<ToolCallRequest> {
    events
        .iter()
        .filter_map(|event| match event {
            ModelEvent::ToolCall { call } => Some(call.clone()),
            _ => None,
        })
        .collect()
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCallRequest {
    ToolCallRequest { id: id.into(), name: name.into(), arguments: arguments.into() }
}

/// The events of one function call whose arguments arrive `piece` characters at a time.
fn function_call(
    index: u64,
    item_id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    piece: usize,
) -> Vec<Value> {
    let item = |status: &str, arguments: &str| json!({ "type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments, "status": status });
    let mut events = vec![
        json!({ "type": "response.output_item.added", "output_index": index, "item": item("in_progress", "") }),
    ];
    let chars: Vec<char> = arguments.chars().collect();
    for delta in chars.chunks(piece) {
        events.push(json!({
            "type": "response.function_call_arguments.delta",
            "item_id": item_id, "output_index": index, "delta": delta.iter().collect::<String>(),
        }));
    }
    events.push(json!({ "type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index, "arguments": arguments }));
    events.push(json!({ "type": "response.output_item.done", "output_index": index, "item": item("completed", arguments) }));
    events
}

#[tokio::test]
async fn a_text_answer_streams_in_order_and_finishes_with_stop() {
    let server = streaming(vec![
        json!({ "type": "response.created", "sequence_number": 0, "response": { "id": "resp_1", "status": "in_progress" } }),
        json!({ "type": "response.in_progress", "sequence_number": 1, "response": { "id": "resp_1", "status": "in_progress" } }),
        json!({ "type": "response.output_item.added", "output_index": 0, "item": { "type": "message", "id": "msg_1", "role": "assistant", "content": [] } }),
        json!({ "type": "response.content_part.added", "item_id": "msg_1", "output_index": 0, "content_index": 0, "part": { "type": "output_text", "text": "" } }),
        text("Hel"),
        text("lo"),
        json!({ "type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "content_index": 0, "text": "Hello" }),
        completed(Value::Null),
    ]);
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            ModelEvent::Attempt { number: 1 },
            ModelEvent::TextDelta { text: "Hel".into() },
            ModelEvent::TextDelta { text: "lo".into() },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
}

#[tokio::test]
async fn arguments_split_across_many_deltas_become_one_call() {
    let arguments = r#"{"path":"src/main.rs","line":42}"#;
    let mut events = function_call(0, "fc_1", "call_1", "read_file", arguments, 1);
    events.push(completed(Value::Null));
    let server = streaming(events);
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(calls(&events), [call("call_1", "read_file", arguments)]);
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[tokio::test]
async fn two_parallel_calls_come_out_in_their_order() {
    let mut events = function_call(0, "fc_a", "call_a", "read_file", r#"{"path":"a.txt"}"#, 3);
    events.extend(function_call(1, "fc_b", "call_b", "list_files", r#"{"path":"."}"#, 2));
    events.push(completed(Value::Null));
    let server = streaming(events);
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(
        calls(&events),
        [call("call_a", "read_file", r#"{"path":"a.txt"}"#), call("call_b", "list_files", r#"{"path":"."}"#)]
    );
}

#[tokio::test]
async fn an_encrypted_reasoning_item_is_replayed_in_the_next_requests_input() {
    let item = json!({
        "type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAB-opaque",
        "summary": [{ "type": "summary_text", "text": "**Reading** the file" }],
    });
    let mut first = vec![
        json!({ "type": "response.output_item.added", "output_index": 0, "item": { "type": "reasoning", "id": "rs_1", "summary": [] } }),
        json!({ "type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "**Reading** the file" }),
        json!({ "type": "response.output_item.done", "output_index": 0, "item": item }),
    ];
    first.extend(function_call(1, "fc_1", "call_1", "read_file", r#"{"path":"a.txt"}"#, 4));
    first.push(completed(Value::Null));
    let (first, second) = (sse(&first), sse(&[text("It says hello."), completed(Value::Null)]));
    let server =
        MockServer::start(move |n, _| Answer::Stream(if n == 0 { first.clone() } else { second.clone() }));
    let provider = provider(&server);
    let mut request = ModelRequest { effort: Some("low".into()), ..request() };
    let (events, error) = collect(provider.stream(request.clone(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(events[1], ModelEvent::ThoughtDelta { text: "**Reading** the file".into() });
    let details = events.iter().find_map(|event| match event {
        ModelEvent::ReasoningDetails { details } => Some(details.clone()),
        _ => None,
    });
    assert_eq!(details, Some(json!([item])));

    // What the session would record, then the next request.
    request.messages.push(ChatMessage::Assistant {
        text: String::new(),
        tool_calls: calls(&events),
        reasoning: Some(Reasoning { text: "**Reading** the file".into(), details }),
    });
    request.messages.push(ChatMessage::Tool { call_id: "call_1".into(), content: "hello".into() });
    let (_, error) = collect(provider.stream(request, CancellationToken::new())).await;
    assert_eq!(error, None);

    let seen = server.seen();
    assert_eq!(seen[0].body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(seen[0].body["reasoning"], json!({ "effort": "low" }));
    assert_eq!(
        seen[1].body["input"],
        json!([
            { "role": "user", "content": [{ "type": "input_text", "text": "Hi" }] },
            item,
            { "type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": r#"{"path":"a.txt"}"# },
            { "type": "function_call_output", "call_id": "call_1", "output": "hello" },
        ])
    );
}

#[tokio::test]
async fn an_error_event_mid_stream_fails_with_the_servers_message() {
    let server = streaming(vec![
        text("Half an"),
        json!({ "type": "error", "code": "server_error", "message": "The model crashed mid-answer.", "param": null }),
        text(" answer"),
    ]);
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(
        error,
        Some(ProviderError::Status { status: 500, message: "The model crashed mid-answer.".into() })
    );
    assert_eq!(events.last(), Some(&ModelEvent::TextDelta { text: "Half an".into() }));
    assert_eq!(server.seen().len(), 1, "an error the server reported is not retried");
}

#[tokio::test]
async fn a_failed_response_fails_with_the_servers_message() {
    let server = streaming(vec![json!({
        "type": "response.failed",
        "response": { "id": "resp_1", "status": "failed", "error": { "code": "rate_limit_exceeded", "message": "Rate limit reached for gpt-test." } },
    })]);
    let (_, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(
        error,
        Some(ProviderError::Status { status: 429, message: "Rate limit reached for gpt-test.".into() })
    );
}

#[tokio::test]
async fn an_http_400_gives_openais_message_and_never_the_key() {
    let body = json!({ "error": {
        "message": format!("Invalid value for 'input' (key {KEY})."),
        "type": "invalid_request_error", "param": "input", "code": "invalid_value",
    } });
    let body = body.to_string();
    let server = MockServer::start(move |_, _| Answer::Status(400, body.clone()));
    let provider = provider(&server);
    let (_, error) = collect(provider.stream(request(), CancellationToken::new())).await;
    assert_eq!(
        error,
        Some(ProviderError::Status { status: 400, message: "Invalid value for 'input' (key ***).".into() })
    );
    assert_eq!(server.seen().len(), 1, "a 400 is not retried");
    assert!(!format!("{provider:?}").contains(KEY));
}

#[tokio::test]
async fn usage_with_cached_tokens_reaches_the_consumer_before_finish() {
    let server = streaming(vec![
        text("Hi"),
        completed(json!({
            "input_tokens": 2000, "output_tokens": 30, "total_tokens": 2030,
            "input_tokens_details": { "cached_tokens": 1920 },
            "output_tokens_details": { "reasoning_tokens": 12 },
        })),
    ]);
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(
        events[2..],
        [
            ModelEvent::Usage {
                usage: Usage {
                    input_tokens: 2000,
                    output_tokens: 30,
                    cached_input_tokens: 1920,
                    cache_write_input_tokens: 0,
                    reasoning_tokens: 12,
                }
            },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
}

#[tokio::test]
async fn an_answer_cut_at_max_output_tokens_finishes_with_length() {
    let server = streaming(vec![
        text("The first half"),
        json!({ "type": "response.incomplete", "response": {
            "status": "incomplete", "incomplete_details": { "reason": "max_output_tokens" },
            "usage": { "input_tokens": 5, "output_tokens": 16 },
        } }),
    ]);
    let request = ModelRequest { max_tokens: Some(16), ..request() };
    let (events, error) = collect(provider(&server).stream(request, CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Length }));
    assert_eq!(server.seen()[0].body["max_output_tokens"], 16);
}

#[tokio::test]
async fn cancelling_mid_stream_ends_it_at_once_and_closes_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let (closed_tx, mut closed) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        let mut sink = [0u8; 8192];
        // Small requests arrive in one read; the answer need not wait for more.
        let _ = socket.read(&mut sink).await;
        let piece = sse(&[text("Thinking about it")]);
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        let _ = socket.write_all(format!("{head}{:x}\r\n{piece}\r\n", piece.len()).as_bytes()).await;
        while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
        let _ = closed_tx.send(());
    });
    let provider = ResponsesProvider::new(HttpConfig::new(base_url)).expect("valid config");
    let cancel = CancellationToken::new();
    let mut stream = provider.stream(request(), cancel.clone());
    assert_eq!(stream.next().await, Some(Ok(ModelEvent::Attempt { number: 1 })));
    assert_eq!(stream.next().await, Some(Ok(ModelEvent::TextDelta { text: "Thinking about it".into() })));

    cancel.cancel();
    let started = Instant::now();
    assert_eq!(stream.next().await, Some(Err(ProviderError::Cancelled)));
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(stream.next().await, None);
    let hung_up = tokio::time::timeout(Duration::from_secs(2), closed.recv()).await;
    assert!(matches!(hung_up, Ok(Some(()))), "the server still sees the connection open");
}

#[tokio::test]
async fn the_request_goes_to_responses_with_flat_tools_and_store_false() {
    let server = streaming(vec![text("ok"), completed(Value::Null)]);
    let request = ModelRequest {
        model: "gpt-test".into(),
        messages: vec![
            ChatMessage::System { text: "Be brief.".into() },
            ChatMessage::User {
                parts: vec![
                    UserPart::Text { text: "What is this?".into() },
                    UserPart::Image { mime_type: "image/png".into(), data: "iVBORw0=".into() },
                ],
            },
            ChatMessage::Assistant {
                text: "A picture; let me read the notes.".into(),
                tool_calls: vec![call("call_1", "read_file", r#"{"path":"a"}"#)],
                // Reasoning without Responses items is not this server's to get back.
                reasoning: Some(Reasoning { text: "hm".into(), details: None }),
            },
            ChatMessage::Tool { call_id: "call_1".into(), content: "contents".into() },
        ],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            parameters: json!({ "type": "object", "properties": { "path": { "type": "string" } } }),
        }],
        effort: None,
        max_tokens: Some(1000),
    };
    let (_, error) = collect(provider(&server).stream(request, CancellationToken::new())).await;
    assert_eq!(error, None);

    let seen = &server.seen()[0];
    assert_eq!(seen.request_line, "POST /v1/responses HTTP/1.1");
    assert_eq!(seen.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(seen.header("accept"), Some("text/event-stream"));
    assert_eq!(
        seen.body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "store": false,
            "instructions": "Be brief.",
            "max_output_tokens": 1000,
            "include": ["reasoning.encrypted_content"],
            "input": [
                { "role": "user", "content": [
                    { "type": "input_text", "text": "What is this?" },
                    { "type": "input_image", "image_url": "data:image/png;base64,iVBORw0=" },
                ] },
                { "type": "message", "role": "assistant", "content": [
                    { "type": "output_text", "text": "A picture; let me read the notes." },
                ] },
                { "type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": r#"{"path":"a"}"# },
                { "type": "function_call_output", "call_id": "call_1", "output": "contents" },
            ],
            "tools": [{
                "type": "function",
                "name": "read_file",
                "description": "Reads a file.",
                "parameters": { "type": "object", "properties": { "path": { "type": "string" } } },
                "strict": false,
            }],
        })
    );
}

#[tokio::test]
async fn a_body_that_ends_before_response_completed_is_retried_not_taken_as_the_answer() {
    let server = MockServer::start(|n, _| match n {
        // A proxy drops the upstream mid-answer and closes the body cleanly.
        0 => Answer::Stream(sse(&[text("Hal")])),
        _ => Answer::Stream(sse(&[text("Hello"), completed(Value::Null)])),
    });
    let (mut events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    // The retry is announced, with why; its wait has jitter.
    assert!(
        matches!(&events[2], ModelEvent::Retrying { next: 2, reason, .. } if reason.contains("before the answer finished")),
        "{events:?}"
    );
    events.remove(2);
    assert_eq!(
        events,
        [
            ModelEvent::Attempt { number: 1 },
            ModelEvent::TextDelta { text: "Hal".into() },
            ModelEvent::Attempt { number: 2 },
            ModelEvent::TextDelta { text: "Hello".into() },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
    let once = MockServer::start(|_, _| Answer::Stream(sse(&[text("Hal")])));
    let config = HttpConfig { max_retries: 0, ..config(&once) };
    let provider = ResponsesProvider::new(config).expect("valid config");
    let (_, error) = collect(provider.stream(request(), CancellationToken::new())).await;
    assert!(
        matches!(&error, Some(ProviderError::Status { status: 200, message: m }) if m.contains("before the answer finished")),
        "{error:?}"
    );
}

/// OpenAI's answer to encrypted reasoning asked of a model that does not reason.
fn encrypted_unsupported() -> Answer {
    Answer::Status(
        400,
        json!({ "error": { "message": "Encrypted content is not supported with this model.",
            "type": "invalid_request_error", "param": "include", "code": null } })
        .to_string(),
    )
}

#[tokio::test]
async fn encrypted_reasoning_is_asked_for_without_an_effort() {
    let server = streaming(vec![text("Hi."), completed(Value::Null)]);
    let (_, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(server.seen()[0].body["include"], json!(["reasoning.encrypted_content"]));
}

#[tokio::test]
async fn a_model_refusing_encrypted_reasoning_is_asked_once_more_without_it_and_then_never() {
    let server = MockServer::start(|_, request| {
        if request.body.get("include").is_some() {
            return encrypted_unsupported();
        }
        Answer::Stream(sse(&[text("Hi."), completed(Value::Null)]))
    });
    // No retries: the second ask is not one.
    let provider = ResponsesProvider::new(HttpConfig { max_retries: 0, ..config(&server) }).expect("valid");
    let (events, error) = collect(provider.stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            ModelEvent::Attempt { number: 1 },
            ModelEvent::Attempt { number: 2 },
            ModelEvent::TextDelta { text: "Hi.".into() },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
    let (_, error) = collect(provider.stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    let seen = server.seen();
    assert_eq!(seen.len(), 3, "the model is remembered: its next request goes without at once");
    assert!(seen[0].body.get("include").is_some());
    assert!(seen[1].body.get("include").is_none() && seen[2].body.get("include").is_none());
}

#[tokio::test]
async fn a_refusal_that_is_not_about_asking_for_encrypted_reasoning_is_not_sent_again() {
    let server = MockServer::start(|_, _| {
        Answer::Status(
            400,
            json!({ "error": { "message": "The encrypted content for item rs_1 could not be verified.",
                "type": "invalid_request_error", "param": null, "code": "invalid_encrypted_content" } })
            .to_string(),
        )
    });
    let (_, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert!(
        matches!(&error, Some(ProviderError::Status { status: 400, message }) if message.contains("could not be verified")),
        "{error:?}"
    );
    assert_eq!(server.seen().len(), 1);
}
