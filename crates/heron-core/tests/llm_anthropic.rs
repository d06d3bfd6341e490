//! The Anthropic provider against a loopback server speaking Anthropic's own SSE (`event:`
//! and `data:` lines): answers, tool calls, thinking that comes back, errors in and before
//! the stream, usage with cache reads, the request's headers, and cancellation.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use heron_core::config::flavor::RequestShape;
use heron_core::llm::anthropic::AnthropicProvider;
use heron_core::llm::http::HttpConfig;
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

const KEY: &str = "sk-ant-test-0123456789abcdef";

/// An SSE body as Anthropic writes it: each event named by its type, then its data.
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|event| format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or("")))
        .collect()
}

fn message_start(usage: Value) -> Value {
    json!({ "type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [], "stop_reason": null, "usage": usage,
    } })
}

fn block_start(index: u32, block: Value) -> Value {
    json!({ "type": "content_block_start", "index": index, "content_block": block })
}

fn block_delta(index: u32, delta: Value) -> Value {
    json!({ "type": "content_block_delta", "index": index, "delta": delta })
}

fn block_stop(index: u32) -> Value {
    json!({ "type": "content_block_stop", "index": index })
}

fn message_end(stop_reason: &str, output_tokens: u64) -> [Value; 2] {
    [
        json!({ "type": "message_delta", "delta": { "stop_reason": stop_reason, "stop_sequence": null },
                "usage": { "output_tokens": output_tokens } }),
        json!({ "type": "message_stop" }),
    ]
}

/// A whole text answer, as one text block.
fn text_answer(pieces: &[&str]) -> String {
    let mut events = vec![
        message_start(json!({ "input_tokens": 12, "output_tokens": 1 })),
        block_start(0, json!({ "type": "text", "text": "" })),
        json!({ "type": "ping" }),
    ];
    events.extend(pieces.iter().map(|text| block_delta(0, json!({ "type": "text_delta", "text": text }))));
    events.push(block_stop(0));
    events.extend(message_end("end_turn", 5));
    sse(&events)
}

fn config(origin: &str) -> HttpConfig {
    HttpConfig {
        base_url: format!("{origin}/v1"),
        api_key: Some(Secret::new(KEY)),
        request_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(1),
        response_timeout: Duration::from_secs(60),
        max_retries: 2,
        retry_base_delay: Duration::from_millis(10),
        shape: RequestShape::default(),
    }
}

fn provider(server: &MockServer) -> AnthropicProvider {
    AnthropicProvider::new(config(&server.origin)).expect("valid config")
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "claude-test".into(),
        messages: vec![
            ChatMessage::System { text: "Be brief.".into() },
            ChatMessage::User { parts: vec![UserPart::Text { text: "Hi".into() }] },
        ],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            parameters: json!({ "type": "object", "properties": { "path": { "type": "string" } } }),
        }],
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

#[tokio::test]
async fn a_text_answer_streams_in_order_and_finishes_with_stop() {
    let server = MockServer::start(|_, _| Answer::Stream(text_answer(&["Hel", "lo"])));
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        [
            ModelEvent::Attempt { number: 1 },
            ModelEvent::TextDelta { text: "Hel".into() },
            ModelEvent::TextDelta { text: "lo".into() },
            ModelEvent::Usage { usage: Usage { input_tokens: 12, output_tokens: 5, ..Usage::default() } },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
}

#[tokio::test]
async fn the_request_carries_x_api_key_and_anthropic_version_and_no_authorization() {
    let server = MockServer::start(|_, _| Answer::Stream(text_answer(&["ok"])));
    let (_, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    let seen = &server.seen()[0];
    assert_eq!(seen.request_line, "POST /v1/messages HTTP/1.1");
    assert_eq!(seen.header("x-api-key"), Some(KEY));
    assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen.header("authorization"), None);
    assert_eq!(seen.body["model"], "claude-test");
    assert_eq!(seen.body["stream"], true);
    assert_eq!(seen.body["max_tokens"], heron_core::llm::anthropic::DEFAULT_MAX_TOKENS);
    assert_eq!(seen.body["system"][0]["text"], "Be brief.");
    assert_eq!(seen.body["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(seen.messages()[0]["role"], "user");
}

#[tokio::test]
async fn configured_headers_replace_the_version_and_add_betas() {
    let server = MockServer::start(|_, _| Answer::Stream(text_answer(&["ok"])));
    let shape = RequestShape {
        headers: vec![
            ("anthropic-version".into(), "2099-01-01".into()),
            ("anthropic-beta".into(), "interleaved-thinking-2025-05-14".into()),
        ],
        ..RequestShape::default()
    };
    let provider = AnthropicProvider::new(HttpConfig { shape, ..config(&server.origin) }).expect("valid");
    let (_, error) = collect(provider.stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    let seen = &server.seen()[0];
    assert_eq!(seen.header("anthropic-version"), Some("2099-01-01"));
    assert_eq!(seen.header("anthropic-beta"), Some("interleaved-thinking-2025-05-14"));
}

#[tokio::test]
async fn tool_input_split_across_many_deltas_and_a_parallel_call_are_assembled() {
    let input = r#"{"path":"notes/a.txt","limit":20}"#;
    let mut events = vec![
        message_start(json!({ "input_tokens": 40, "output_tokens": 1 })),
        block_start(0, json!({ "type": "text", "text": "" })),
        block_delta(0, json!({ "type": "text_delta", "text": "Reading both." })),
        block_stop(0),
        block_start(1, json!({ "type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {} })),
    ];
    // Three bytes per event, as Anthropic's chunks fall at any byte.
    for piece in input.as_bytes().chunks(3) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        events.push(block_delta(1, json!({ "type": "input_json_delta", "partial_json": piece })));
    }
    events.push(block_stop(1));
    events.push(block_start(
        2,
        json!({ "type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {} }),
    ));
    events.push(block_delta(2, json!({ "type": "input_json_delta", "partial_json": "{\"path\":" })));
    events.push(block_delta(2, json!({ "type": "input_json_delta", "partial_json": "\"b.txt\"}" })));
    events.push(block_stop(2));
    events.extend(message_end("tool_use", 30));
    let body = sse(&events);
    let server = MockServer::start(move |_, _| Answer::Stream(body.clone()));

    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(
        calls(&events),
        [
            ToolCallRequest { id: "toolu_a".into(), name: "read_file".into(), arguments: input.into() },
            ToolCallRequest {
                id: "toolu_b".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"b.txt"}"#.into()
            },
        ]
    );
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[tokio::test]
async fn thinking_and_its_signature_come_back_in_the_next_request() {
    let first = sse(&[
        message_start(json!({ "input_tokens": 30, "output_tokens": 1 })),
        block_start(0, json!({ "type": "thinking", "thinking": "", "signature": "" })),
        block_delta(0, json!({ "type": "thinking_delta", "thinking": "The notes are in a.txt." })),
        block_delta(0, json!({ "type": "signature_delta", "signature": "EqQBCkYIBRgCKkDsig==" })),
        block_stop(0),
        block_start(1, json!({ "type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {} })),
        block_delta(1, json!({ "type": "input_json_delta", "partial_json": "{\"path\":\"a.txt\"}" })),
        block_stop(1),
        message_end("tool_use", 20)[0].clone(),
        message_end("tool_use", 20)[1].clone(),
    ]);
    let server = MockServer::start(move |n, _| {
        Answer::Stream(if n == 0 { first.clone() } else { text_answer(&["They say hello."]) })
    });
    let provider = provider(&server);
    let mut asked = request();
    asked.effort = Some("low".into());

    let (events, error) = collect(provider.stream(asked.clone(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert!(events.contains(&ModelEvent::ThoughtDelta { text: "The notes are in a.txt.".into() }));
    let details = events
        .iter()
        .find_map(|event| match event {
            ModelEvent::ReasoningDetails { details } => Some(details.clone()),
            _ => None,
        })
        .expect("the thinking block comes back");

    asked.messages.push(ChatMessage::Assistant {
        text: String::new(),
        tool_calls: calls(&events),
        reasoning: Some(Reasoning { text: "The notes are in a.txt.".into(), details: Some(details) }),
    });
    asked.messages.push(ChatMessage::Tool { call_id: "toolu_1".into(), content: "hello".into() });
    let (_, error) = collect(provider.stream(asked, CancellationToken::new())).await;
    assert_eq!(error, None);

    let seen = server.seen();
    assert_eq!(seen[0].body["thinking"], json!({ "type": "enabled", "budget_tokens": 2048 }));
    let assistant = &seen[1].messages()[1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0],
        json!({ "type": "thinking", "thinking": "The notes are in a.txt.", "signature": "EqQBCkYIBRgCKkDsig==" })
    );
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(assistant["content"][1]["input"], json!({ "path": "a.txt" }));
    assert_eq!(seen[1].messages()[2]["content"][0]["tool_use_id"], "toolu_1");
    assert!(seen[1].body.get("thinking").is_some(), "the loop's message opens with thinking");
}

#[tokio::test]
async fn an_overloaded_error_mid_stream_is_retried_and_fails_with_the_servers_message_at_last() {
    let body = sse(&[
        message_start(json!({ "input_tokens": 12, "output_tokens": 1 })),
        block_start(0, json!({ "type": "text", "text": "" })),
        block_delta(0, json!({ "type": "text_delta", "text": "Half" })),
        json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
    ]);
    let server = MockServer::start(move |_, _| Answer::Stream(body.clone()));
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, Some(ProviderError::Status { status: 529, message: "Overloaded".into() }));
    assert!(events.contains(&ModelEvent::TextDelta { text: "Half".into() }));
    assert_eq!(server.seen().len(), 3, "a busy server is asked again, up to max_retries");
    assert!(events.contains(&ModelEvent::Attempt { number: 3 }));
}

#[tokio::test]
async fn an_invalid_request_error_mid_stream_is_not_retried() {
    let body = sse(&[
        message_start(json!({ "input_tokens": 12, "output_tokens": 1 })),
        json!({ "type": "error", "error": { "type": "invalid_request_error", "message": "prompt is too long" } }),
    ]);
    let server = MockServer::start(move |_, _| Answer::Stream(body.clone()));
    let (_, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert!(
        matches!(&error, Some(ProviderError::Status { message, .. }) if message == "prompt is too long"),
        "{error:?}"
    );
    assert_eq!(server.seen().len(), 1, "the same request would fail the same way");
}

#[tokio::test]
async fn an_overloaded_status_is_retried_as_a_new_attempt() {
    let server = MockServer::start(|n, _| match n {
        0 => Answer::Status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(),
        ),
        _ => Answer::Stream(text_answer(&["Back."])),
    });
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert!(events.contains(&ModelEvent::Attempt { number: 2 }));
    assert!(events.contains(&ModelEvent::TextDelta { text: "Back.".into() }));
}

#[tokio::test]
async fn a_401_gives_anthropics_message_and_never_the_key() {
    let body = json!({ "type": "error", "error": {
        "type": "authentication_error", "message": format!("invalid x-api-key {KEY}"),
    } });
    let server = MockServer::start(move |_, _| Answer::Status(401, body.to_string()));
    let provider = provider(&server);
    let (_, error) = collect(provider.stream(request(), CancellationToken::new())).await;
    let Some(ProviderError::Status { status, message }) = error else { panic!("expected a status error") };
    assert_eq!(status, 401);
    assert_eq!(message, "invalid x-api-key ***");
    assert_eq!(server.seen().len(), 1, "a 401 is not retried");
    assert!(!format!("{provider:?}").contains(KEY));
}

#[tokio::test]
async fn usage_with_cache_reads_reaches_the_usage_event() {
    let body = sse(&[
        message_start(json!({
            "input_tokens": 7, "cache_read_input_tokens": 4000, "cache_creation_input_tokens": 300, "output_tokens": 1,
        })),
        block_start(0, json!({ "type": "text", "text": "" })),
        block_delta(0, json!({ "type": "text_delta", "text": "Cached." })),
        block_stop(0),
        message_end("end_turn", 9)[0].clone(),
        message_end("end_turn", 9)[1].clone(),
    ]);
    let server = MockServer::start(move |_, _| Answer::Stream(body.clone()));
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert!(
        events.contains(&ModelEvent::Usage {
            usage: Usage {
                input_tokens: 4307,
                output_tokens: 9,
                cached_input_tokens: 4000,
                cache_write_input_tokens: 300,
                reasoning_tokens: 0,
            }
        }),
        "{events:?}"
    );
}

#[tokio::test]
async fn cancelling_mid_stream_ends_it_at_once_and_closes_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("addr"));
    let (closed_tx, mut closed) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else { return };
        let mut buf = [0u8; 8192];
        let _ = socket.read(&mut buf).await;
        let events = sse(&[
            message_start(json!({ "input_tokens": 1, "output_tokens": 1 })),
            block_start(0, json!({ "type": "text", "text": "" })),
            block_delta(0, json!({ "type": "text_delta", "text": "Thinking about it" })),
        ]);
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
        let _ = socket.write_all(head.as_bytes()).await;
        let _ = socket.write_all(format!("{:x}\r\n{events}\r\n", events.len()).as_bytes()).await;
        // Holds the stream open until the client hangs up.
        while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
        let _ = closed_tx.send(());
    });
    let provider = AnthropicProvider::new(config(&origin)).expect("valid");
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
async fn a_body_that_ends_before_its_stop_reason_is_retried_not_taken_as_the_answer() {
    let cut = sse(&[
        message_start(json!({ "input_tokens": 12, "output_tokens": 1 })),
        block_start(0, json!({ "type": "text", "text": "" })),
        block_delta(0, json!({ "type": "text_delta", "text": "Hal" })),
    ]);
    let server = MockServer::start(move |n, _| match n {
        0 => Answer::Stream(cut.clone()),
        _ => Answer::Stream(text_answer(&["Hello"])),
    });
    let (events, error) = collect(provider(&server).stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    let attempts = events.iter().filter(|e| matches!(e, ModelEvent::Attempt { .. })).count();
    assert_eq!(attempts, 2, "{events:?}");
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hal", "Hello"]);
}
