//! Model providers: one [`Provider`] trait that turns a [`ModelRequest`] into a stream of
//! [`ModelEvent`]s: streaming clients for OpenAI-compatible Chat Completions, Anthropic
//! Messages and OpenAI Responses over one HTTP layer, and a deterministic scripted model.
//! Knows nothing of ACP.

pub mod anthropic;
mod driven;
pub mod http;
pub mod models;
pub mod openai;
pub mod registry;
pub mod responses;
pub mod scripted;
pub(crate) mod sse;
pub mod tap;

use std::pin::Pin;

use futures_util::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

// Usage is the core's vocabulary (session totals and prices count it); providers report it.
pub use crate::types::Usage;

/// The most bytes a tool call's arguments may take. Providers keep no more than one byte
/// past it; the turn fails a call over it without running it.
pub const MAX_TOOL_ARGUMENT_BYTES: usize = 8 * 1024 * 1024;

/// The longest tool call name or id a response may give, in bytes. Real ones are short (a
/// name among the tools offered, an id of a few dozen bytes), and every call is held until
/// its response ends: without this a server could park one event's worth of bytes (16 MiB)
/// in each of a response's hundreds of calls, none of it counted in the reply's cap.
pub const MAX_TOOL_IDENTITY_BYTES: usize = 1024;

/// `value`, a tool call's `field` (`name` or `id`) as a server sent it, or a protocol error
/// when it is past [`MAX_TOOL_IDENTITY_BYTES`].
pub(crate) fn tool_identity(field: &str, value: String) -> Result<String, ProviderError> {
    if value.len() > MAX_TOOL_IDENTITY_BYTES {
        return Err(ProviderError::Protocol(format!(
            "a tool call's {field} is longer than {MAX_TOOL_IDENTITY_BYTES} bytes"
        )));
    }
    Ok(value)
}

/// Appends a piece of a tool call's arguments to `held`, keeping at most one byte past
/// [`MAX_TOOL_ARGUMENT_BYTES`]: enough for the turn to refuse the call without holding what
/// a runaway model keeps sending. Never cuts a character.
pub(crate) fn push_arguments(held: &mut String, piece: &str) {
    push_capped(held, piece, MAX_TOOL_ARGUMENT_BYTES + 1);
}

/// Appends `piece` to `held` while `held` stays within `cap` bytes, never cutting a
/// character; true when some of `piece` was left out.
pub(crate) fn push_capped(held: &mut String, piece: &str, cap: usize) -> bool {
    let mut end = cap.saturating_sub(held.len()).min(piece.len());
    while !piece.is_char_boundary(end) {
        end -= 1;
    }
    held.push_str(&piece[..end]);
    end < piece.len()
}

/// The events every stream ends with, in order: structured reasoning (when any), usage
/// (when reported), then `Finish`.
pub(crate) fn end_events(
    out: &mut Vec<ModelEvent>,
    details: Vec<Value>,
    usage: Option<Usage>,
    reason: FinishReason,
) {
    if !details.is_empty() {
        out.push(ModelEvent::ReasoningDetails { details: Value::Array(details) });
    }
    if let Some(usage) = usage {
        out.push(ModelEvent::Usage { usage });
    }
    out.push(ModelEvent::Finish { reason });
}

/// A chat message in provider-neutral form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    /// Instructions for the model.
    System {
        /// The text.
        text: String,
    },
    /// What the user said.
    User {
        /// Text and images, in order.
        parts: Vec<UserPart>,
    },
    /// What the model said, including the tools it asked for.
    Assistant {
        /// The visible answer (may be empty when only tools were called).
        text: String,
        /// Tool calls, in the order the model made them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallRequest>,
        /// What the model thought before it, for servers that want it back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<Reasoning>,
    },
    /// The result of one tool call.
    Tool {
        /// The id of the call this answers.
        call_id: String,
        /// What the tool returned, as text for the model.
        content: String,
    },
}

/// The reasoning behind an assistant message, as the server sent it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reasoning {
    /// The thought's text, as the editor saw it.
    pub text: String,
    /// Structured reasoning (OpenRouter's `reasoning_details`, or the Responses API's
    /// reasoning items), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// One part of a user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum UserPart {
    /// Plain text (embedded resources arrive here already rendered as text).
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Its MIME type, e.g. `image/png`.
        mime_type: String,
        /// The base64 data.
        data: String,
    },
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The provider's id of the call (made up when the provider gives none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the JSON text the model produced (may be invalid JSON).
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its arguments.
    pub parameters: Value,
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The model id as the provider knows it (without the `provider/` prefix).
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// A reasoning effort level the provider understands (`low`, `medium`, `high`), if any.
    pub effort: Option<String>,
    /// The most tokens the answer may take, if limited.
    pub max_tokens: Option<u32>,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It wants the tool calls it made to run.
    ToolCalls,
    /// It hit the token limit.
    Length,
    /// It refused (content filter or an explicit refusal).
    Refusal,
}

/// What a model stream yields, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ModelEvent {
    /// A new attempt starts (the first, or a retry after a transient failure). Text of an
    /// earlier attempt is void; the consumer starts a new message.
    Attempt {
        /// 1 for the first attempt.
        number: u32,
    },
    /// The attempt that just failed is tried again after `wait_ms` (a 429, a 5xx, a broken
    /// stream): the next event is the new attempt's [`ModelEvent::Attempt`]. Sent before the
    /// wait, so the user hears of it while it lasts.
    Retrying {
        /// The attempt that will follow (2 for the first retry).
        next: u32,
        /// The most attempts the request may take.
        of: u32,
        /// How long until it starts, in milliseconds.
        wait_ms: u64,
        /// Why the attempt failed, redacted of the key.
        reason: String,
    },
    /// A piece of the visible answer.
    TextDelta {
        /// The text.
        text: String,
    },
    /// A piece of reasoning.
    ThoughtDelta {
        /// The text.
        text: String,
    },
    /// A complete tool call (arguments already assembled across deltas).
    ToolCall {
        /// The call.
        call: ToolCallRequest,
    },
    /// Structured reasoning the server wants back verbatim with this message in later
    /// requests (OpenRouter's `reasoning_details`, the Responses API's reasoning items),
    /// whole, before `Finish`.
    ReasoningDetails {
        /// The entries, as the server sent them (merged across deltas).
        details: Value,
    },
    /// Token usage, usually near the end.
    Usage {
        /// The counts.
        usage: Usage,
    },
    /// The last event of a successful stream.
    Finish {
        /// Why the model stopped.
        reason: FinishReason,
    },
}

/// Why a model request failed. Messages never carry keys or headers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The endpoint could not be reached or the connection broke.
    #[error("cannot reach the model endpoint: {0}")]
    Unreachable(String),
    /// The endpoint answered with an error status.
    #[error("the model endpoint answered {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The provider's message, redacted and clipped.
        message: String,
    },
    /// The request took longer than its timeout.
    #[error("the model request timed out after {0} s")]
    Timeout(u64),
    /// The stream was malformed.
    #[error("the model stream was malformed: {0}")]
    Protocol(String),
    /// A scripted turn asked for this failure.
    #[error("{0}")]
    Scripted(String),
    /// The request was cancelled.
    #[error("the model request was cancelled")]
    Cancelled,
}

impl ProviderError {
    /// Whether the server refused the request as longer than the model's context window.
    /// Servers say so in words rather than in one code (OpenAI's `context_length_exceeded`,
    /// Anthropic's "prompt is too long", llama.cpp's "exceeds the available context size").
    pub fn is_context_overflow(&self) -> bool {
        let ProviderError::Status { message, .. } = self else { return false };
        let message = message.to_ascii_lowercase();
        [
            "context_length_exceeded",
            "context length",
            "context window",
            "context size",
            "maximum context",
            "prompt is too long",
            "too many tokens",
            "input is too long",
        ]
        .iter()
        .any(|words| message.contains(words))
    }
}

impl ProviderError {
    /// Whether the server refused this request for what it holds, so that sending it again
    /// would fail the same way: too long for the model, malformed for the server (400, 413,
    /// 422), or answered 200 with an empty stream (how some servers report a prompt too long
    /// while streaming).
    pub fn refuses_the_request(&self) -> bool {
        self.is_context_overflow()
            || matches!(self, ProviderError::Status { status: 200 | 400 | 413 | 422, .. })
    }
}

/// A stream of model events.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ProviderError>> + Send + 'static>>;

/// A count of tokens, when the server gave one.
pub type TokenCount = Pin<Box<dyn Future<Output = Option<u64>> + Send + 'static>>;

/// A model provider.
pub trait Provider: Send + Sync + 'static {
    /// Starts a request. Cancelling `cancel` ends the stream at once with
    /// [`ProviderError::Cancelled`] and aborts the underlying request.
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream;

    /// The tokens the server's own tokenizer makes of `text`, where the server serves one;
    /// `None` when it serves none, or the count failed or would cost too much (the caller's
    /// estimate stands in). Dropping the future abandons the count.
    fn count_tokens(&self, text: String) -> TokenCount {
        drop(text);
        Box::pin(std::future::ready(None))
    }
}
