//! The OpenAI-compatible provider against a hand-written HTTP/1.1 server on 127.0.0.1:
//! recorded SSE bodies, retries, errors without secrets, timeouts, cancellation and the
//! request's shape.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use heron_core::llm::http::HttpConfig;
use heron_core::llm::openai::OpenAiProvider;
use heron_core::llm::{
    ChatMessage, FinishReason, ModelEvent, ModelRequest, ModelStream, Provider, ProviderError,
    ToolCallRequest, ToolSpec, Usage, UserPart,
};
use heron_core::secret::Secret;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long a test waits for something that should be prompt.
const PROMPT: Duration = Duration::from_secs(2);

const KEY: &str = "sk-test-0123456789abcdef";

/// What the server answers to one connection.
#[derive(Clone)]
enum Reply {
    /// 200 with these SSE pieces, each its own HTTP chunk, then the end of the body.
    Sse(Vec<String>),
    /// 200 with these pieces, then the connection closes without ending the body.
    BreakAfter(Vec<String>),
    /// An error status with headers and a body.
    Status { code: u16, headers: Vec<(&'static str, &'static str)>, body: String },
    /// Reads the request and never answers.
    Hang,
    /// 200 with these pieces, then waits; reports on `closed` when the client hangs up.
    HoldOpen(Vec<String>, mpsc::UnboundedSender<()>),
}

/// One request as the server saw it.
type Recorded = crate::support::server_mock::Seen;

/// The test server: answers connection n with reply n (the last one repeats).
struct Server {
    base_url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Server {
    async fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base_url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        tokio::spawn(async move {
            let mut served = 0;
            loop {
                let Ok((socket, _)) = listener.accept().await else { return };
                let reply = replies[served.min(replies.len() - 1)].clone();
                served += 1;
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move { serve(socket, reply, recorded).await });
            }
        });
        Server { base_url, requests }
    }

    fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }

    fn config(&self) -> HttpConfig {
        HttpConfig {
            base_url: self.base_url.clone(),
            api_key: None,
            request_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(60),
            max_retries: 2,
            retry_base_delay: Duration::from_millis(10),
            shape: Default::default(),
        }
    }

    fn provider(&self) -> OpenAiProvider {
        OpenAiProvider::new(self.config()).expect("valid config")
    }
}

async fn serve(mut socket: TcpStream, reply: Reply, recorded: Arc<Mutex<Vec<Recorded>>>) {
    let Some(request) = read_request(&mut socket).await else { return };
    recorded.lock().expect("lock").push(request);
    let sse_head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\
                    Connection: close\r\n\r\n";
    match reply {
        Reply::Sse(pieces) => {
            let _ = socket.write_all(sse_head.as_bytes()).await;
            write_chunks(&mut socket, &pieces).await;
            let _ = socket.write_all(b"0\r\n\r\n").await;
            let _ = socket.shutdown().await;
        }
        Reply::BreakAfter(pieces) => {
            let _ = socket.write_all(sse_head.as_bytes()).await;
            write_chunks(&mut socket, &pieces).await;
            // Dropping the socket without the last chunk breaks the body.
        }
        Reply::Status { code, headers, body } => {
            let mut head =
                format!("HTTP/1.1 {code} Error\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
        Reply::Hang => wait_for_hang_up(&mut socket).await,
        Reply::HoldOpen(pieces, closed) => {
            let _ = socket.write_all(sse_head.as_bytes()).await;
            write_chunks(&mut socket, &pieces).await;
            wait_for_hang_up(&mut socket).await;
            let _ = closed.send(());
        }
    }
}

async fn write_chunks(socket: &mut TcpStream, pieces: &[String]) {
    for piece in pieces {
        let _ = socket.write_all(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes()).await;
        let _ = socket.flush().await;
    }
}

/// Reads until the client closes the connection.
async fn wait_for_hang_up(socket: &mut TcpStream) {
    let mut sink = [0u8; 1024];
    while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = socket.read(&mut buf).await.ok().filter(|&n| n > 0)?;
        data.extend_from_slice(&buf[..n]);
    };
    let mut body = data[head_end + 4..].to_vec();
    let (seen, missing) = Recorded::parse(&data[..head_end], &body)?;
    let length = body.len() + missing;
    while body.len() < length {
        let n = socket.read(&mut buf).await.ok().filter(|&n| n > 0)?;
        body.extend_from_slice(&buf[..n]);
    }
    Some(seen.with_body(&body))
}

/// SSE pieces for these chunks, then `[DONE]`.
fn sse(chunks: &[Value]) -> Vec<String> {
    let mut pieces: Vec<String> = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
    pieces.push("data: [DONE]\n\n".to_owned());
    pieces
}

fn delta(delta: Value) -> Value {
    json!({ "choices": [{ "index": 0, "delta": delta, "finish_reason": null }] })
}

fn finish(reason: &str) -> Value {
    json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": reason }] })
}

fn text_reply(text: &str) -> Reply {
    Reply::Sse(sse(&[delta(json!({ "role": "assistant", "content": text })), finish("stop")]))
}

fn request() -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
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

fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            ModelEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn text_deltas_stream_in_order_and_finish_with_stop() {
    let server = Server::start(vec![Reply::Sse(sse(&[
        delta(json!({ "role": "assistant", "content": "" })),
        delta(json!({ "content": "Hel" })),
        delta(json!({ "content": "lo" })),
        finish("stop"),
    ]))])
    .await;
    let (events, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
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
async fn reasoning_deltas_of_either_name_become_thoughts() {
    let server = Server::start(vec![Reply::Sse(sse(&[
        delta(json!({ "reasoning_content": "Let me " })),
        delta(json!({ "reasoning": "think." })),
        delta(json!({ "content": "Done." })),
        finish("stop"),
    ]))])
    .await;
    let (events, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(
        events[1..3],
        [
            ModelEvent::ThoughtDelta { text: "Let me ".into() },
            ModelEvent::ThoughtDelta { text: "think.".into() }
        ]
    );
    assert_eq!(text_of(&events), "Done.");
}

#[tokio::test]
async fn tool_calls_split_across_interleaved_deltas_are_assembled_by_index() {
    let call = |index: u32, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut function = json!({ "arguments": args });
        if let Some(name) = name {
            function["name"] = json!(name);
        }
        let mut piece = json!({ "index": index, "type": "function", "function": function });
        if let Some(id) = id {
            piece["id"] = json!(id);
        }
        delta(json!({ "tool_calls": [piece] }))
    };
    let server = Server::start(vec![Reply::Sse(sse(&[
        call(0, Some("call_a"), Some("read_file"), ""),
        call(1, Some("call_b"), Some("list_files"), "{\"pa"),
        call(0, None, None, "{\"path\":"),
        call(1, None, None, "th\":\".\"}"),
        call(0, None, None, "\"a.txt\"}"),
        finish("tool_calls"),
    ]))])
    .await;
    let (events, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(
        events[1..],
        [
            ModelEvent::ToolCall {
                call: ToolCallRequest {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\":\"a.txt\"}".into()
                }
            },
            ModelEvent::ToolCall {
                call: ToolCallRequest {
                    id: "call_b".into(),
                    name: "list_files".into(),
                    arguments: "{\"path\":\".\"}".into()
                }
            },
            ModelEvent::Finish { reason: FinishReason::ToolCalls },
        ]
    );
}

#[tokio::test]
async fn usage_in_a_final_chunk_without_choices_comes_before_finish() {
    let server = Server::start(vec![Reply::Sse(sse(&[
        delta(json!({ "content": "Hi" })),
        finish("stop"),
        json!({
            "choices": [],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "prompt_tokens_details": { "cached_tokens": 60 },
                "completion_tokens_details": { "reasoning_tokens": 5 },
            },
        }),
    ]))])
    .await;
    let (events, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(
        events[2..],
        [
            ModelEvent::Usage {
                usage: Usage {
                    input_tokens: 100,
                    output_tokens: 20,
                    cached_input_tokens: 60,
                    reasoning_tokens: 5,
                    cache_write_input_tokens: 0,
                }
            },
            ModelEvent::Finish { reason: FinishReason::Stop },
        ]
    );
}

#[tokio::test]
async fn a_429_is_retried_after_retry_after_as_a_new_attempt() {
    let server = Server::start(vec![
        Reply::Status {
            code: 429,
            headers: vec![("Retry-After", "0")],
            body: r#"{"error":{"message":"slow down"}}"#.into(),
        },
        text_reply("Hello"),
    ])
    .await;
    let (events, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    assert_eq!(events[0], ModelEvent::Attempt { number: 1 });
    // The wait is announced before it starts, with the server's own words.
    assert_eq!(
        events[1],
        ModelEvent::Retrying {
            next: 2,
            of: 3,
            wait_ms: 0,
            reason: "the model endpoint answered 429: slow down".into()
        }
    );
    assert_eq!(events[2], ModelEvent::Attempt { number: 2 });
    assert_eq!(text_of(&events), "Hello");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_persistent_500_fails_with_its_status_after_max_retries() {
    let server = Server::start(vec![Reply::Status {
        code: 500,
        headers: Vec::new(),
        body: r#"{"error":{"message":"overloaded"}}"#.into(),
    }])
    .await;
    let (events, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
    assert_eq!(error, Some(ProviderError::Status { status: 500, message: "overloaded".into() }));
    let attempts: Vec<_> = events.iter().filter(|e| matches!(e, ModelEvent::Attempt { .. })).collect();
    assert_eq!(attempts.len(), 3, "the first attempt and max_retries = 2 retries");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_stream_broken_before_finish_is_retried() {
    let server = Server::start(vec![
        Reply::BreakAfter(vec![format!("data: {}\n\n", delta(json!({ "content": "Half an ans" })))]),
        text_reply("A whole answer"),
    ])
    .await;
    let (events, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    let second =
        events.iter().position(|e| *e == ModelEvent::Attempt { number: 2 }).expect("a second attempt");
    assert_eq!(text_of(&events[second..]), "A whole answer");
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_401_fails_at_once_and_its_message_never_shows_the_key() {
    let body = json!({ "error": { "message": format!("Incorrect API key provided: {KEY}"), "type": "invalid_request_error" } });
    let server =
        Server::start(vec![Reply::Status { code: 401, headers: Vec::new(), body: body.to_string() }]).await;
    let config = HttpConfig { api_key: Some(Secret::new(KEY)), ..server.config() };
    let provider = OpenAiProvider::new(config).expect("valid config");
    let (_, error) = collect(provider.stream(request(), CancellationToken::new())).await;
    let Some(ProviderError::Status { status, message }) = error else { panic!("expected a status error") };
    assert_eq!(status, 401);
    assert_eq!(message, "Incorrect API key provided: ***");
    assert_eq!(server.requests().len(), 1, "a 401 is not retried");
    assert!(!format!("{provider:?}").contains(KEY));
}

#[tokio::test]
async fn a_long_error_body_is_clipped() {
    let server =
        Server::start(vec![Reply::Status { code: 400, headers: Vec::new(), body: "x".repeat(10_000) }]).await;
    let (_, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
    let Some(ProviderError::Status { status: 400, message }) = error else {
        panic!("expected a status error")
    };
    assert!(message.len() <= 2048, "{} bytes", message.len());
}

#[tokio::test]
async fn a_silent_server_times_out_within_the_request_timeout() {
    let server = Server::start(vec![Reply::Hang]).await;
    let config = HttpConfig { request_timeout: Duration::from_millis(300), ..server.config() };
    let provider = OpenAiProvider::new(config).expect("valid config");
    let started = Instant::now();
    let (_, error) = collect(provider.stream(request(), CancellationToken::new())).await;
    assert_eq!(error, Some(ProviderError::Timeout(1)));
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
}

#[tokio::test]
async fn cancelling_mid_stream_ends_it_at_once_and_closes_the_connection() {
    let (closed_tx, mut closed) = mpsc::unbounded_channel();
    let pieces = vec![format!("data: {}\n\n", delta(json!({ "content": "Thinking about it" })))];
    let server = Server::start(vec![Reply::HoldOpen(pieces, closed_tx)]).await;
    let cancel = CancellationToken::new();
    let mut stream = server.provider().stream(request(), cancel.clone());
    assert_eq!(stream.next().await, Some(Ok(ModelEvent::Attempt { number: 1 })));
    assert_eq!(stream.next().await, Some(Ok(ModelEvent::TextDelta { text: "Thinking about it".into() })));

    cancel.cancel();
    let started = Instant::now();
    assert_eq!(stream.next().await, Some(Err(ProviderError::Cancelled)));
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(stream.next().await, None);
    let hung_up = tokio::time::timeout(PROMPT, closed.recv()).await;
    assert!(matches!(hung_up, Ok(Some(()))), "the server still sees the connection open");
}

#[tokio::test]
async fn the_request_carries_messages_tools_options_and_the_key() {
    let server = Server::start(vec![text_reply("ok")]).await;
    let config = HttpConfig { api_key: Some(Secret::new(KEY)), ..server.config() };
    let provider = OpenAiProvider::new(config).expect("valid config");
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
                text: String::new(),
                tool_calls: vec![ToolCallRequest {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    arguments: "{\"path\":\"a\"}".into(),
                }],
                reasoning: None,
            },
            ChatMessage::Tool { call_id: "call_1".into(), content: "contents".into() },
        ],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            parameters: json!({ "type": "object", "properties": { "path": { "type": "string" } } }),
        }],
        effort: Some("high".into()),
        max_tokens: Some(1000),
    };
    let (_, error) = collect(provider.stream(request, CancellationToken::new())).await;
    assert_eq!(error, None);

    let seen = &server.requests()[0];
    assert_eq!(seen.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(seen.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(
        seen.body,
        json!({
            "model": "gpt-test",
            "stream": true,
            "stream_options": { "include_usage": true },
            "reasoning_effort": "high",
            "max_tokens": 1000,
            "messages": [
                { "role": "system", "content": "Be brief." },
                { "role": "user", "content": [
                    { "type": "text", "text": "What is this?" },
                    { "type": "image_url", "image_url": { "url": "data:image/png;base64,iVBORw0=" } },
                ] },
                { "role": "assistant", "content": null, "tool_calls": [
                    { "id": "call_1", "type": "function",
                      "function": { "name": "read_file", "arguments": "{\"path\":\"a\"}" } },
                ] },
                { "role": "tool", "tool_call_id": "call_1", "content": "contents" },
            ],
            "tools": [{ "type": "function", "function": {
                "name": "read_file",
                "description": "Reads a file.",
                "parameters": { "type": "object", "properties": { "path": { "type": "string" } } },
            } }],
        })
    );
}

#[tokio::test]
async fn without_a_key_there_is_no_authorization_header_and_no_empty_fields() {
    let server = Server::start(vec![text_reply("ok")]).await;
    let (_, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    let seen = &server.requests()[0];
    assert_eq!(seen.header("authorization"), None);
    for absent in ["tools", "reasoning_effort", "max_tokens"] {
        assert!(seen.body.get(absent).is_none(), "{absent} is sent");
    }
    assert_eq!(seen.body["messages"][1], json!({ "role": "user", "content": "Hi" }));
}

#[tokio::test]
async fn a_body_that_ends_with_neither_finish_reason_nor_done_is_retried_then_fails() {
    // A proxy drops the upstream mid-answer and closes the body cleanly.
    let cut = Reply::Sse(vec![format!("data: {}\n\n", delta(json!({ "content": "Hal" })))]);
    let server = Server::start(vec![cut.clone(), text_reply("Hello")]).await;
    let (events, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
    assert_eq!(error, None);
    let second =
        events.iter().position(|e| *e == ModelEvent::Attempt { number: 2 }).expect("a second attempt");
    assert_eq!(text_of(&events[second..]), "Hello");

    let always_cut = Server::start(vec![cut]).await;
    let (events, error) = collect(always_cut.provider().stream(request(), CancellationToken::new())).await;
    assert!(
        matches!(&error, Some(ProviderError::Status { status: 200, message: m }) if m.contains("before the answer finished")),
        "{error:?}"
    );
    assert!(!events.iter().any(|e| matches!(e, ModelEvent::Finish { .. })), "never taken as the answer");
    assert_eq!(always_cut.requests().len(), 3, "the first attempt and max_retries = 2 retries");
}

#[tokio::test]
async fn a_finish_reason_without_done_or_done_without_a_finish_reason_is_a_whole_answer() {
    let no_done = Reply::Sse(vec![
        format!("data: {}\n\n", delta(json!({ "content": "One" }))),
        format!("data: {}\n\n", finish("stop")),
    ]);
    let no_reason = Reply::Sse(vec![
        format!("data: {}\n\n", delta(json!({ "content": "Two" }))),
        "data: [DONE]\n\n".to_owned(),
    ]);
    for (reply, text) in [(no_done, "One"), (no_reason, "Two")] {
        let server = Server::start(vec![reply]).await;
        let (events, error) = collect(server.provider().stream(request(), CancellationToken::new())).await;
        assert_eq!(error, None);
        assert_eq!(text_of(&events), text);
        assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
        assert_eq!(server.requests().len(), 1);
    }
}
