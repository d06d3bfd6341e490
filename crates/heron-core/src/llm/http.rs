//! What every streamed HTTP model API shares: one POST per attempt, retries, timeouts,
//! cancellation, headers and keys, and errors without secrets. Each API (Chat Completions,
//! Anthropic Messages, OpenAI Responses) supplies only its endpoint, its request body and
//! the [`Fold`] that turns its stream events into [`ModelEvent`]s.
//!
//! Rules, in the order a request meets them:
//!
//! - Every attempt starts with `Attempt { number }` (1 first); text of an earlier attempt
//!   is void.
//! - A request the server refuses for something optional the API added on its own (the
//!   Responses API's encrypted reasoning, which some models do not support) is sent once
//!   more without it, at once and beside the retries below.
//! - Retried, at most `max_retries` times, with exponential backoff and jitter (or the
//!   server's `Retry-After` seconds, up to [`MAX_RETRY_DELAY`]): connect and send
//!   failures, 429, 500, 502, 503, 504, 529, a stream that breaks before the answer
//!   finished, one that ends cleanly after some events but before it (no finish reason nor
//!   `[DONE]`, no stop reason, no `response.completed`: a proxy or upstream that dropped
//!   it), and an error sent inside the stream that says the server is busy (429, 503, 529).
//!   Any other status fails at once with the provider's message.
//! - A 200 whose stream ends with no event at all is the server's answer, not a lost
//!   connection: it fails at once as status 200 with what the body held, since the same
//!   request would end the same way.
//! - Not retried: a request that receives no byte for `request_timeout` fails with
//!   `Timeout`. A stalled model tends to stall again, and retrying would multiply the
//!   wait the user chose.
//! - Once the answer has finished, a break or stall only loses trailing usage: the stream
//!   still ends with `Finish`.
//! - Cancellation ends the stream at once and drops the HTTP request, which closes its
//!   connection.
//! - The endpoint is `{base_url}/{path}` built as a URL, so a base URL's query (Azure's
//!   `api-version`) stays a query; configured parameters join it.
//! - Every error message passes through `scrub`: the api key is redacted and the text
//!   clipped, before it is logged or returned.

use std::error::Error as _;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use reqwest::{Response, Url};
use serde_json::Value;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

mod address;

pub(crate) use self::address::{endpoint_url, request_headers};
use super::driven::{Emitter, drive};
use super::sse::{Payload, SseDecoder};
use super::{ModelEvent, ModelRequest, ModelStream, Provider, ProviderError};
use crate::config::flavor::RequestShape;
use crate::secret::{Secret, clip, redact};

/// The longest wait between attempts, whatever the backoff or `Retry-After` says.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// The most bytes of a provider's error message kept in an error.
const MAX_MESSAGE_BYTES: usize = 2048;

/// The most bytes of an error response body read.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// The longest one response may stream, unless configured (`response_timeout_s`): an hour,
/// which a slow local model writing a long answer stays within.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(3600);

/// How to reach a model endpoint.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`;
    /// requests go to the API's path below it.
    pub base_url: String,
    /// The key; local servers need none.
    pub api_key: Option<Secret>,
    /// How long a request may go without receiving a byte (headers or body).
    pub request_timeout: Duration,
    /// How long opening a connection may take.
    pub connect_timeout: Duration,
    /// How long one response may stream in all. The idle timeout alone lets a server that
    /// sends a keep-alive comment in time hold a turn for good.
    pub response_timeout: Duration,
    /// How many times a transient failure is retried.
    pub max_retries: u32,
    /// The backoff before the first retry; it doubles with each further retry.
    pub retry_base_delay: Duration,
    /// What the server accepts beyond the common body: fields, headers, query.
    pub shape: RequestShape,
}

impl HttpConfig {
    /// A configuration for `base_url` without a key, with default timeouts and retries.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            request_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            max_retries: 3,
            retry_base_delay: Duration::from_millis(500),
            shape: RequestShape::default(),
        }
    }

    /// The same configuration with `key` as its api key.
    pub fn with_api_key(mut self, key: Secret) -> Self {
        self.api_key = Some(key);
        self
    }
}

/// Whether the stream goes on after a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// More payloads may follow.
    More,
    /// The stream said it is complete (`[DONE]`, `message_stop`, `response.completed`).
    Done,
}

/// Folds the stream events of one response into [`ModelEvent`]s. Pure data handling, so
/// every quirk of a server is testable without I/O.
pub(crate) trait Fold: Default + Send + 'static {
    /// Folds in one event, pushing the events it completes onto `out`.
    fn push_payload(
        &mut self,
        payload: &Payload,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Progress, ProviderError>;

    /// Whether the answer has finished (what may follow is usage and the end marker).
    /// Every API says when an answer is done (a finish reason or `[DONE]`, Anthropic's stop
    /// reason, the Responses API's `response.completed`), so a body that ends cleanly
    /// before saying so was cut off and is retried like a break, never taken as the answer.
    fn has_finished(&self) -> bool;

    /// Ends the stream: what is still held, then usage, then `Finish`.
    fn finish(self, out: &mut Vec<ModelEvent>);
}

/// One streamed model API: where requests go, what they carry, how the stream reads.
pub(crate) trait Api: std::fmt::Debug + Send + Sync + 'static {
    /// The stream's fold.
    type Fold: Fold;

    /// The endpoint's path below the base URL, e.g. `["chat", "completions"]`.
    fn path(&self) -> &'static [&'static str];

    /// The JSON body of a streamed request.
    fn body(&self, request: &ModelRequest, shape: &RequestShape) -> Value;

    /// The header the key goes in, as it is, when the config names none; `None` sends
    /// `Authorization: Bearer KEY`.
    fn key_header(&self) -> Option<&'static str> {
        None
    }

    /// Headers every request carries unless the config sets them (API versions).
    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The body of `request` without what the server just refused with `error`, when that
    /// was something optional the API added on its own; `None` when nothing can go. Asked
    /// once per request, after a failure that is not retried.
    fn without_refused(
        &self,
        _request: &ModelRequest,
        _shape: &RequestShape,
        _error: &ProviderError,
    ) -> Option<Value> {
        None
    }
}

/// A [`Provider`] for one streamed HTTP API.
#[derive(Debug)]
pub(crate) struct HttpProvider<A: Api> {
    shared: Arc<Shared<A>>,
}

impl<A: Api> Clone for HttpProvider<A> {
    fn clone(&self) -> Self {
        Self { shared: Arc::clone(&self.shared) }
    }
}

/// What every request of a provider shares.
#[derive(Debug)]
struct Shared<A> {
    api: A,
    client: reqwest::Client,
    endpoint: Url,
    /// The fixed and configured headers and the key's header, marked sensitive.
    headers: HeaderMap,
    config: HttpConfig,
}

impl<A: Api> HttpProvider<A> {
    /// Checks the configuration and builds the HTTP client.
    pub(crate) fn new(config: HttpConfig, api: A) -> Result<Self, ProviderError> {
        let endpoint = endpoint_url(&config.base_url, api.path(), &config.shape.query).ok_or_else(|| {
            let shown = scrub_text(&config.base_url, config.api_key.as_ref());
            ProviderError::Unreachable(format!("the base URL `{shown}` is not an http(s) URL"))
        })?;
        let key_header = config.shape.key_header.as_deref().or(api.key_header());
        let headers =
            request_headers(&config.shape, api.fixed_headers(), key_header, config.api_key.as_ref())?;
        let client = http_client(config.connect_timeout, config.api_key.as_ref())?;
        Ok(Self { shared: Arc::new(Shared { api, client, endpoint, headers, config }) })
    }

    /// Where requests go.
    pub(crate) fn endpoint(&self) -> &str {
        self.shared.endpoint.as_str()
    }

    /// The client and headers (key included) requests go with, for a side request to the
    /// same server (a token count).
    pub(crate) fn client_and_headers(&self) -> (reqwest::Client, HeaderMap) {
        (self.shared.client.clone(), self.shared.headers.clone())
    }
}

impl<A: Api> Provider for HttpProvider<A> {
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let shared = Arc::clone(&self.shared);
        drive(cancel, move |emit| async move { shared.run(&request, &emit).await })
    }
}

/// An HTTP client with Heron's user agent and `connect_timeout`.
pub(crate) fn http_client(
    connect_timeout: Duration,
    key: Option<&Secret>,
) -> Result<reqwest::Client, ProviderError> {
    client_builder()
        .connect_timeout(connect_timeout)
        .user_agent(concat!("heron/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| ProviderError::Unreachable(scrub_text(&describe(error), key)))
}

/// A client builder with Heron's TLS provider installed. reqwest is built without a crypto
/// provider of its own (`rustls-no-provider`), so every client Heron builds, for models or
/// MCP servers, starts here: the first call makes ring the process's provider.
pub fn client_builder() -> reqwest::ClientBuilder {
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        // An error means another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}

/// Why one attempt failed, and whether another may succeed.
struct Failure {
    error: ProviderError,
    retryable: bool,
    /// The server's `Retry-After`, when it sent one.
    retry_after: Option<Duration>,
}

impl Failure {
    fn fatal(error: ProviderError) -> Self {
        Self { error, retryable: false, retry_after: None }
    }

    fn transient(error: ProviderError) -> Self {
        Self { error, retryable: true, retry_after: None }
    }
}

impl<A: Api> Shared<A> {
    async fn run(&self, request: &ModelRequest, emit: &Emitter) -> Result<(), ProviderError> {
        let mut body = encode(&self.api.body(request, &self.config.shape))?;
        let mut number = 1;
        let mut retries = 0;
        let mut lightened = false;
        loop {
            emit.emit(ModelEvent::Attempt { number }).await;
            let failure = match self.attempt(body.clone(), emit).await {
                Ok(()) => return Ok(()),
                Err(failure) => failure,
            };
            let error = scrub(failure.error, self.config.api_key.as_ref());
            // Once per request, and not counted as a retry: the same body would fail the
            // same way, while one without the part refused may well succeed.
            if !failure.retryable
                && !lightened
                && let Some(lighter) = self.api.without_refused(request, &self.config.shape, &error)
            {
                tracing::warn!(attempt = number, %error, "the server refused an optional part; asking without it");
                body = encode(&lighter)?;
                lightened = true;
                number += 1;
                continue;
            }
            if !failure.retryable || retries >= self.config.max_retries {
                tracing::debug!(attempt = number, %error, "model request failed");
                return Err(error);
            }
            let delay = match failure.retry_after {
                Some(wait) => wait.min(MAX_RETRY_DELAY),
                None => backoff(self.config.retry_base_delay, number),
            };
            let wait_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            tracing::warn!(attempt = number, delay_ms = wait_ms, %error, "model request failed; retrying");
            let of = number - retries + self.config.max_retries;
            emit.emit(ModelEvent::Retrying { next: number + 1, of, wait_ms, reason: error.to_string() })
                .await;
            tokio::time::sleep(delay).await;
            retries += 1;
            number += 1;
        }
    }

    /// Sends the request once and streams its events.
    async fn attempt(&self, body: Bytes, emit: &Emitter) -> Result<(), Failure> {
        let builder = self
            .client
            .post(self.endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .headers(self.headers.clone())
            .body(body);
        let response = match timeout(self.config.request_timeout, builder.send()).await {
            Err(_) => return Err(Failure::fatal(self.timeout())),
            Ok(Err(error)) => return Err(send_failure(error)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let message = self.error_message(response).await;
            let error = ProviderError::Status { status: status.as_u16(), message };
            // 529 is Anthropic's "overloaded".
            let retryable = matches!(status.as_u16(), 429 | 500 | 502 | 503 | 504 | 529);
            return Err(Failure { error, retryable, retry_after });
        }
        match timeout(self.config.response_timeout, self.read_stream(response, emit)).await {
            Ok(read) => read,
            Err(_) => Err(Failure::fatal(ProviderError::Timeout(rounded_up(self.config.response_timeout)))),
        }
    }

    async fn read_stream(&self, mut response: Response, emit: &Emitter) -> Result<(), Failure> {
        let mut decoder = SseDecoder::default();
        let mut fold = A::Fold::default();
        let mut payloads = Vec::new();
        // How many events came, and the body's first bytes while none has: a body with no
        // event may be an error written as plain JSON or text.
        let mut events = 0;
        let mut unread = Vec::new();
        loop {
            let bytes = match timeout(self.config.request_timeout, response.chunk()).await {
                Ok(Ok(Some(bytes))) => bytes,
                Ok(Ok(None)) => break,
                // Once the answer finished, only trailing usage is lost.
                _ if fold.has_finished() => break,
                Err(_) => return Err(Failure::fatal(self.timeout())),
                Ok(Err(error)) => {
                    let message = format!("the stream broke: {}", describe(error));
                    return Err(Failure::transient(ProviderError::Unreachable(message)));
                }
            };
            if events == 0 && unread.len() < MAX_ERROR_BODY_BYTES {
                unread.extend_from_slice(&bytes[..bytes.len().min(MAX_ERROR_BODY_BYTES - unread.len())]);
            }
            decoder.push(&bytes, &mut payloads).map_err(|_| {
                Failure::fatal(ProviderError::Protocol("a stream event exceeded 16 MiB".into()))
            })?;
            events += payloads.len();
            if feed(&mut fold, &mut payloads, emit).await? == Progress::Done {
                return finish(fold, emit).await;
            }
        }
        decoder.finish(&mut payloads);
        events += payloads.len();
        if feed(&mut fold, &mut payloads, emit).await? == Progress::More && !fold.has_finished() {
            return Err(self.unfinished(events, &unread));
        }
        finish(fold, emit).await
    }

    /// A 200 whose body ended, cleanly, before the answer finished. With no event at all,
    /// the server gave up before its first token (llama-cpp-python's answer to a prompt
    /// longer than its window, or to an option it cannot serve, logged only on its side):
    /// the same request would end the same way, so it is not retried, and what the body
    /// held is the message. Cut after some events, it is what a proxy that lost its
    /// upstream sends, and another attempt may get through.
    fn unfinished(&self, events: usize, body: &[u8]) -> Failure {
        let status = 200;
        if events == 0 {
            // Keep-alive comments are not what the server said.
            let text = String::from_utf8_lossy(body);
            let said: Vec<&str> = text.lines().filter(|line| !line.starts_with(':')).collect();
            let message = match error_body_message(said.join("\n").as_bytes()) {
                Some(said) => format!("no event, only: {said}"),
                None => "an empty stream: the server failed before its first token, and its own log says \
                         why (such as a prompt too long for it, or an option it does not take)"
                    .to_owned(),
            };
            let message = scrub_text(&message, self.config.api_key.as_ref());
            return Failure::fatal(ProviderError::Status { status, message });
        }
        let message = format!("the stream ended after {events} events, before the answer finished");
        Failure::transient(ProviderError::Status { status, message })
    }

    /// The provider's message from an error response.
    async fn error_message(&self, mut response: Response) -> String {
        let status = response.status();
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY_BYTES {
            match timeout(self.config.request_timeout, response.chunk()).await {
                Ok(Ok(Some(bytes))) => body.extend_from_slice(&bytes),
                _ => break,
            }
        }
        let message = error_body_message(&body)
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("no message").to_owned());
        scrub_text(&message, self.config.api_key.as_ref())
    }

    fn timeout(&self) -> ProviderError {
        ProviderError::Timeout(rounded_up(self.config.request_timeout))
    }
}

/// `limit` in whole seconds, rounded up, so a sub-second test timeout does not read as
/// "after 0 s".
fn rounded_up(limit: Duration) -> u64 {
    limit.as_secs() + u64::from(limit.subsec_nanos() > 0)
}

/// A request body as the bytes sent.
fn encode(body: &Value) -> Result<Bytes, ProviderError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|error| ProviderError::Protocol(format!("cannot encode the request: {error}")))
}

/// `error.message` of a JSON error body (OpenAI's and Anthropic's shapes both), or the
/// body's text when it is not JSON; `None` for an empty body.
pub(crate) fn error_body_message(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let from_json = serde_json::from_str::<Value>(&text).ok().and_then(|value| {
        let error = value.get("error").unwrap_or(&value);
        error.get("message").or(Some(error)).and_then(Value::as_str).map(str::to_owned)
    });
    from_json.or_else(|| Some(text.trim().to_owned()).filter(|text| !text.is_empty()))
}

/// An error the server sent inside the stream: worth another try when it says the server
/// is busy (rate limited, unavailable, Anthropic's overloaded), which passes; any other is
/// final, since the same request would fail the same way (a context overflow, a refusal).
fn stream_failure(error: ProviderError) -> Failure {
    match error {
        ProviderError::Status { status: 429 | 503 | 529, .. } => Failure::transient(error),
        other => Failure::fatal(other),
    }
}

/// Folds the pending payloads in and emits what they complete.
async fn feed<F: Fold>(
    fold: &mut F,
    payloads: &mut Vec<Payload>,
    emit: &Emitter,
) -> Result<Progress, Failure> {
    let mut events = Vec::new();
    for payload in payloads.drain(..) {
        let progress = fold.push_payload(&payload, &mut events).map_err(stream_failure)?;
        for event in events.drain(..) {
            emit.emit(event).await;
        }
        if progress == Progress::Done {
            return Ok(Progress::Done);
        }
    }
    Ok(Progress::More)
}

async fn finish<F: Fold>(fold: F, emit: &Emitter) -> Result<(), Failure> {
    let mut events = Vec::new();
    fold.finish(&mut events);
    for event in events {
        emit.emit(event).await;
    }
    Ok(())
}

/// A failure to send the request: worth another try unless the request itself was bad.
fn send_failure(error: reqwest::Error) -> Failure {
    let retryable = !error.is_builder();
    let error = ProviderError::Unreachable(describe(error));
    if retryable { Failure::transient(error) } else { Failure::fatal(error) }
}

/// The error and its causes on one line, without the URL (which may carry a key).
pub(crate) fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// `Retry-After` in seconds; the HTTP-date form is ignored and backoff applies instead.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let seconds: f64 = value.parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(3600.0)))
}

/// The delay before retry `number` (1 for the first retry): `base * 2^(number - 1)`,
/// capped, then jittered down to between half and all of it so that clients that failed
/// together do not retry together.
fn backoff(base: Duration, number: u32) -> Duration {
    let full = base.saturating_mul(1 << number.saturating_sub(1).min(16)).min(MAX_RETRY_DELAY);
    let unit = (RandomState::new().hash_one(number) % 1_000_001) as f64 / 1_000_000.0;
    full.mul_f64(0.5 + unit / 2.0)
}

/// Redacts the key from the error's message and clips it.
pub(crate) fn scrub(error: ProviderError, key: Option<&Secret>) -> ProviderError {
    match error {
        ProviderError::Unreachable(message) => ProviderError::Unreachable(scrub_text(&message, key)),
        ProviderError::Status { status, message } => {
            ProviderError::Status { status, message: scrub_text(&message, key) }
        }
        ProviderError::Protocol(message) => ProviderError::Protocol(scrub_text(&message, key)),
        ProviderError::Scripted(message) => ProviderError::Scripted(scrub_text(&message, key)),
        other @ (ProviderError::Timeout(_) | ProviderError::Cancelled) => other,
    }
}

/// The key redacted from `text`, clipped to what an error may carry.
pub(crate) fn scrub_text(text: &str, key: Option<&Secret>) -> String {
    clip(&redact(text, key), MAX_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_its_jitter_and_stays_capped() {
        let base = Duration::from_millis(100);
        for number in 1..6 {
            let full = base * (1 << (number - 1));
            let delay = backoff(base, number);
            assert!(delay >= full / 2 && delay <= full, "retry {number}: {delay:?}");
        }
        assert!(backoff(Duration::from_secs(10), 30) <= MAX_RETRY_DELAY);
    }

    #[test]
    fn retry_after_reads_seconds_and_ignores_dates() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, "2".parse().expect("header value"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("header value"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn an_error_body_gives_its_message() {
        assert_eq!(error_body_message(br#"{"error":{"message":"bad key"}}"#).as_deref(), Some("bad key"));
        let anthropic = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_body_message(anthropic).as_deref(), Some("Overloaded"));
        assert_eq!(error_body_message(b"  plain text \n").as_deref(), Some("plain text"));
        assert_eq!(error_body_message(b""), None);
    }
}
