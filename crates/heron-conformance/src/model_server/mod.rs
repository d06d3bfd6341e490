//! The kit's model server: a script of the scripted provider served on 127.0.0.1 as the
//! model APIs agents are pointed at (OpenAI Chat Completions and Responses, Anthropic Messages, Gemini's
//! `generateContent` and `streamGenerateContent`), so an
//! agent under test gets past "no model, no key" with no network and no credentials. It
//! plays the script the way the scripted provider does: the turn is the number of
//! assistant messages in the request, so every conversation gets the same answers whatever
//! else runs against the server. Any key is accepted.
//!
//! HTTP/1.1 only as far as agents' clients need: one request per connection, a body of at
//! most [`MAX_BODY`] read by `Content-Length`, the answer streamed as server-sent events and
//! the connection closed at its end.

mod anthropic;
mod gemini;
mod openai;
mod responses;

use std::sync::Arc;
use std::time::Duration;

use heron_core::llm::scripted::{Script, ScriptedProvider};
use heron_core::llm::{ChatMessage, ModelEvent, ModelRequest, Provider, ProviderError};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The largest request read, in bytes: a whole conversation with its tools.
pub const MAX_BODY: usize = 32 * 1024 * 1024;

/// The largest request head read, in bytes.
const MAX_HEAD: usize = 64 * 1024;

/// How long a client may take to send its request.
const READ_WAIT: Duration = Duration::from_secs(30);

/// A wire format the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    OpenAi,
    Responses,
    Anthropic,
    Gemini(gemini::Framing),
}

/// Serves `script` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, script: Script) {
    let provider = Arc::new(ScriptedProvider::new(script));
    loop {
        let Ok((socket, _)) = listener.accept().await else { continue };
        let provider = provider.clone();
        tokio::spawn(async move {
            if let Err(error) = answer(socket, &provider).await {
                tracing::debug!(%error, "a model request was not answered");
            }
        });
    }
}

/// Reads one request from `socket` and answers it.
async fn answer(mut socket: TcpStream, provider: &ScriptedProvider) -> std::io::Result<()> {
    let Ok(read) = tokio::time::timeout(READ_WAIT, read_request(&mut socket)).await else {
        return Ok(());
    };
    let (method, path, body) = match read? {
        Some(request) => request,
        None => {
            return respond(&mut socket, 400, "application/json", r#"{"error":{"message":"bad request"}}"#)
                .await;
        }
    };
    let (path, query) = path.split_once('?').unwrap_or((path.as_str(), ""));
    let sse = query.split('&').any(|pair| pair == "alt=sse");
    let api = match (method.as_str(), path.trim_end_matches('/')) {
        ("GET", p) if p.ends_with("/models") => return models(&mut socket).await,
        ("POST", p) if p.ends_with("/chat/completions") => Api::OpenAi,
        ("POST", p) if p.ends_with("/responses") => Api::Responses,
        ("POST", p) if p.ends_with("/messages") => Api::Anthropic,
        ("POST", p) if p.ends_with(":streamGenerateContent") && sse => Api::Gemini(gemini::Framing::Events),
        ("POST", p) if p.ends_with(":streamGenerateContent") => Api::Gemini(gemini::Framing::Array),
        ("POST", p) if p.ends_with(":generateContent") => Api::Gemini(gemini::Framing::Whole),
        _ => {
            return respond(&mut socket, 404, "application/json", r#"{"error":{"message":"not found"}}"#)
                .await;
        }
    };
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return respond(
            &mut socket,
            400,
            "application/json",
            r#"{"error":{"message":"the body is not JSON"}}"#,
        )
        .await;
    };
    let kind = match api {
        Api::Gemini(gemini::Framing::Array | gemini::Framing::Whole) => "application/json",
        _ => "text/event-stream",
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await?;
    // Gemini names the model in the path (`models/{model}:generateContent`).
    let named = path.rsplit('/').next().and_then(|last| last.split_once(':')).map(|(model, _)| model);
    let model = request["model"].as_str().or(named).unwrap_or("scripted").to_owned();
    let mut stream = provider.stream(played(&request), CancellationToken::new());
    let mut wire = Wire::new(api, &model);
    use futures_util::StreamExt;
    while let Some(event) = stream.next().await {
        let text = match event {
            Ok(event) => wire.event(&event),
            Err(error) => wire.error(&error),
        };
        socket.write_all(text.as_bytes()).await?;
        socket.flush().await?;
    }
    socket.write_all(wire.end().as_bytes()).await?;
    socket.shutdown().await
}

/// A request the scripted provider plays as the client's: as many assistant messages as
/// it holds (which picks the turn), and its text for what a `context` step reports. Gemini
/// calls them `contents`, and the assistant `model`.
fn played(request: &Value) -> ModelRequest {
    let messages = request["messages"].as_array().or_else(|| request["contents"].as_array());
    let mut played = Vec::new();
    // The Responses API's `input` holds the model's replies as runs of output items.
    let replies = request["input"].as_array().map_or(0, |input| responses::replies(input));
    for _ in 0..replies {
        played.push(ChatMessage::Assistant { text: String::new(), tool_calls: Vec::new(), reasoning: None });
    }
    for message in messages.map(Vec::as_slice).unwrap_or_default() {
        if message["role"] == "assistant" || message["role"] == "model" {
            played.push(ChatMessage::Assistant {
                text: String::new(),
                tool_calls: Vec::new(),
                reasoning: None,
            });
        }
    }
    ModelRequest {
        model: request["model"].as_str().unwrap_or_default().to_owned(),
        messages: played,
        tools: Vec::new(),
        effort: None,
        max_tokens: None,
    }
}

/// One answer being written in one API's events.
enum Wire {
    OpenAi(openai::Chunks),
    Responses(responses::Events),
    Anthropic(anthropic::Events),
    Gemini(gemini::Records),
}

impl Wire {
    fn new(api: Api, model: &str) -> Self {
        match api {
            Api::OpenAi => Wire::OpenAi(openai::Chunks::new(model)),
            Api::Responses => Wire::Responses(responses::Events::new(model)),
            Api::Anthropic => Wire::Anthropic(anthropic::Events::new(model)),
            Api::Gemini(framing) => Wire::Gemini(gemini::Records::new(model, framing)),
        }
    }

    fn event(&mut self, event: &ModelEvent) -> String {
        match self {
            Wire::OpenAi(chunks) => chunks.event(event),
            Wire::Responses(events) => events.event_of(event),
            Wire::Anthropic(events) => events.event(event),
            Wire::Gemini(records) => records.event(event),
        }
    }

    fn error(&mut self, error: &ProviderError) -> String {
        match self {
            Wire::OpenAi(chunks) => chunks.error(error),
            Wire::Responses(events) => events.error(error),
            Wire::Anthropic(events) => events.error(error),
            Wire::Gemini(records) => records.error(error),
        }
    }

    fn end(&mut self) -> String {
        match self {
            Wire::OpenAi(chunks) => chunks.end(),
            Wire::Responses(events) => events.end(),
            Wire::Anthropic(events) => events.end(),
            Wire::Gemini(records) => records.end(),
        }
    }
}

/// One `data:` event.
fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// `GET .../models`: the one model the server plays, in OpenAI's list shape and Gemini's.
async fn models(socket: &mut TcpStream) -> std::io::Result<()> {
    let body = serde_json::json!({
        "object": "list",
        "data": [{ "id": "scripted", "object": "model", "owned_by": "heron" }],
        "models": [{ "name": "models/scripted", "supportedGenerationMethods": ["generateContent", "streamGenerateContent"] }],
    });
    respond(socket, 200, "application/json", &body.to_string()).await
}

async fn respond(socket: &mut TcpStream, status: u16, kind: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} Answer\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    socket.shutdown().await
}

/// The method, path and body of one request; `None` when it is not one Heron reads.
async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<(String, String, Vec<u8>)>> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if data.len() > MAX_HEAD {
            return Ok(None);
        }
        let read = socket.read(&mut buffer).await?;
        if read == 0 {
            return Ok(None);
        }
        data.extend_from_slice(&buffer[..read]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let (method, path) =
        (first.next().unwrap_or_default().to_owned(), first.next().unwrap_or_default().to_owned());
    let length = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if length > MAX_BODY {
        return Ok(None);
    }
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        let read = socket.read(&mut buffer).await?;
        if read == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&buffer[..read]);
    }
    body.truncate(length);
    Ok(Some((method, path, body)))
}
