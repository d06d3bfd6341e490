//! MCP's legacy HTTP transport (protocol 2024-11-05), which rmcp 3 no longer ships, as an
//! rmcp [`Transport`]: a GET opens an event stream whose first `endpoint` event names where
//! to POST messages; the server's messages come as `message` events on the stream.
//!
//! Bounds: one event at most [`MAX_MESSAGE`] bytes (the decoder refuses more and the
//! stream ends), a small queue between the stream and the client (a server that floods
//! waits on Heron, not Heron's memory), each POST within the caller's time
//! (`McpLimits::post`) and its answer's body never read. The endpoint must be on the
//! stream's own origin: the editor's headers go nowhere else.

use std::future::Future;

use futures_util::StreamExt;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

use super::MAX_MESSAGE;
use crate::llm::sse::{Event, SseDecoder};

/// How many server messages wait for the client before the stream is read on.
const QUEUE: usize = 32;

/// A failure of the SSE transport, in Heron's words (never a server's body).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SseError {
    /// The server answered with a failing HTTP status.
    #[error("the server answered HTTP {0}")]
    Status(u16),
    /// The request did not go through.
    #[error("{0}")]
    Request(String),
    /// The server did not speak the transport.
    #[error("{0}")]
    Protocol(String),
}

impl SseError {
    /// The failing HTTP status, if that is what this is.
    pub(crate) fn http_status(&self) -> Option<u16> {
        match self {
            SseError::Status(status) => Some(*status),
            _ => None,
        }
    }

    fn request(error: reqwest::Error) -> Self {
        match error.status() {
            Some(status) => SseError::Status(status.as_u16()),
            None => SseError::Request(crate::llm::http::describe(error)),
        }
    }
}

/// A connected legacy SSE server.
pub(super) struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    /// How long one POST may take.
    post: std::time::Duration,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        // Dropping the stream closes its connection.
        self.reader.abort();
    }
}

/// Opens the event stream at `url` and waits for its `endpoint` event (the caller bounds
/// the wait); each message is then POSTed within `post`. A connection refused is told
/// apart, for a caller that tries again.
pub(super) async fn connect(
    client: reqwest::Client,
    url: Url,
    headers: HeaderMap,
    post: std::time::Duration,
) -> Result<SseTransport, (SseError, bool)> {
    let response = client
        .get(url.clone())
        .headers(headers.clone())
        .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
        .send()
        .await
        .map_err(|e| {
            let refused = e.is_connect();
            (SseError::request(e), refused)
        })?;
    let status = response.status();
    if !status.is_success() {
        return Err((SseError::Status(status.as_u16()), false));
    }
    let is_stream = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    if !is_stream {
        return Err((SseError::Protocol("the URL did not answer with an event stream".into()), false));
    }
    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::with_limit(MAX_MESSAGE);
    let mut events = Vec::new();
    let endpoint = 'found: loop {
        let chunk = match body.next().await {
            Some(Ok(chunk)) => chunk,
            Some(Err(e)) => return Err((SseError::request(e), false)),
            None => {
                return Err((
                    SseError::Protocol("the stream ended before naming its endpoint".into()),
                    false,
                ));
            }
        };
        decoder
            .push_events(&chunk, &mut events)
            .map_err(|_| (SseError::Protocol("an event was over the size limit".into()), false))?;
        for event in events.drain(..) {
            if event.name == "endpoint" {
                break 'found endpoint_of(&url, event.data.trim()).map_err(|e| (e, false))?;
            }
        }
    };
    let (sender, incoming) = mpsc::channel(QUEUE);
    let reader = tokio::spawn(pump(body, decoder, sender));
    Ok(SseTransport { client, endpoint, headers, post, incoming, reader })
}

/// Reads the server's messages from `body` into `sender` until either ends: the stream is
/// read on only when the queue has room, and an event over the size limit closes it.
async fn pump<S, B, E>(
    mut body: S,
    mut decoder: SseDecoder,
    sender: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
) where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    let mut events = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        if decoder.push_events(chunk.as_ref(), &mut events).is_err() {
            tracing::warn!("an MCP server's event was over the size limit; its stream is closed");
            return;
        }
        for event in events.drain(..) {
            if let Some(message) = message_of(event)
                && sender.send(message).await.is_err()
            {
                return;
            }
        }
    }
}

/// The POST URL an `endpoint` event names, resolved against the stream's URL; refused
/// unless it has the stream's scheme, host and port.
fn endpoint_of(stream: &Url, named: &str) -> Result<Url, SseError> {
    let endpoint = stream
        .join(named)
        .map_err(|_| SseError::Protocol("the server named an endpoint that is not a URL".into()))?;
    if endpoint.origin() != stream.origin() {
        return Err(SseError::Protocol(
            "the server named an endpoint on another origin; it is not used".into(),
        ));
    }
    Ok(endpoint)
}

/// A server's message, or `None` for another event or data that is not one (logged).
fn message_of(event: Event) -> Option<RxJsonRpcMessage<RoleClient>> {
    if event.name != "message" {
        return None;
    }
    match serde_json::from_str(&event.data) {
        Ok(message) => Some(message),
        Err(error) => {
            tracing::debug!(%error, "an MCP server sent an event that is not a JSON-RPC message");
            None
        }
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .timeout(self.post)
            .json(&item);
        async move {
            let response = request.send().await.map_err(SseError::request)?;
            // The answer comes on the stream; the POST's own body is not read.
            match response.status() {
                status if status.is_success() => Ok(()),
                status => Err(SseError::Status(status.as_u16())),
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_resolves_against_the_stream_and_stays_on_its_origin() {
        let stream = Url::parse("http://127.0.0.1:8000/sse").expect("url");
        let endpoint = endpoint_of(&stream, "/messages/?session_id=abc").expect("same origin");
        assert_eq!(endpoint.as_str(), "http://127.0.0.1:8000/messages/?session_id=abc");
        assert!(endpoint_of(&stream, "http://127.0.0.1:9000/messages").is_err());
        assert!(endpoint_of(&stream, "https://elsewhere.example/m").is_err());
    }

    /// A server that floods its stream while the client reads nothing has [`QUEUE`]
    /// messages waiting and its stream no further read (one more message is held, waiting
    /// for room); each message taken lets one more chunk be read.
    #[test]
    fn a_flooding_stream_is_read_only_as_far_as_the_queue_has_room() {
        use futures_util::FutureExt;
        let read = std::sync::atomic::AtomicUsize::new(0);
        let chunks = (0..10 * QUEUE).map(|n| {
            read.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, ()>(format!(
                "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"ping\"}}\n\n"
            ))
        });
        let (sender, mut incoming) = mpsc::channel(QUEUE);
        let mut pumping =
            Box::pin(pump(futures_util::stream::iter(chunks), SseDecoder::with_limit(MAX_MESSAGE), sender));
        assert!(pumping.as_mut().now_or_never().is_none(), "the pump waits for room");
        assert_eq!(read.load(std::sync::atomic::Ordering::SeqCst), QUEUE + 1);
        assert!(incoming.try_recv().is_ok());
        assert!(pumping.as_mut().now_or_never().is_none());
        assert_eq!(read.load(std::sync::atomic::Ordering::SeqCst), QUEUE + 2, "one taken, one more read");
    }

    #[test]
    fn only_message_events_with_json_rpc_become_messages() {
        let event = |name: &str, data: &str| Event { name: name.into(), data: data.into() };
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert!(message_of(event("message", ping)).is_some());
        assert!(message_of(event("endpoint", ping)).is_none());
        assert!(message_of(event("message", "not json")).is_none());
    }
}
