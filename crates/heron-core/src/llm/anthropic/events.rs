//! Folds the events of one streamed Messages response into [`ModelEvent`]s: content blocks
//! keyed by index (text, tool use, thinking), the stop reason and usage of the message
//! events, and errors sent inside the 200 stream. Pure data handling; no I/O.
//!
//! Text and thinking go out as they arrive. A tool call goes out whole when its block
//! stops; the signed thinking blocks go out together, verbatim, at the end, as
//! `ReasoningDetails`, so the next request can hand them back. Every outside size has a
//! bound: a call's input, the number of blocks, the reasoning kept. A block index that was
//! never started, or JSON that is not an event, fails the stream as `Protocol`; event and
//! block types Anthropic may add later are ignored.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::llm::http::{Fold, Progress};
use crate::llm::sse::Payload;
use crate::llm::{FinishReason, ModelEvent, ProviderError, ToolCallRequest, Usage, tool_identity};

/// The most content blocks one message may have; a stream past it is malformed.
const MAX_BLOCKS: usize = 1024;

/// The most tool calls one message may make: each may hold up to the input bound.
const MAX_TOOL_CALLS: usize = 256;

/// The most bytes of thinking blocks kept for the next request; past it none are kept,
/// since a cut signature is worse than none. The thought still streams as it comes.
const MAX_REASONING_BYTES: usize = 8 * 1024 * 1024;

/// One event of the stream, by its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: StartedBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        #[serde(default)]
        delta: MessageChange,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        #[serde(default)]
        error: Value,
    },
    /// `ping` and whatever Anthropic adds later.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct StartedMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartedBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    /// Server tools' blocks and later kinds: carried along, not read.
    #[serde(other)]
    Other,
}

/// A piece of a content block, by its `type` (`text_delta`, ...).
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "signature_delta")]
    Signature { signature: String },
    /// `citations_delta` and later kinds.
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
struct MessageChange {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Anthropic's counts: input excludes what was read from or written to the cache.
#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

/// The counts so far: `message_start` gives them all, `message_delta` updates those it
/// sends (always the output, cumulative).
#[derive(Debug, Default)]
struct Counts {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_creation: u64,
}

impl Counts {
    fn update(&mut self, wire: WireUsage) {
        let fields = [
            (&mut self.input, wire.input_tokens),
            (&mut self.output, wire.output_tokens),
            (&mut self.cache_read, wire.cache_read_input_tokens),
            (&mut self.cache_creation, wire.cache_creation_input_tokens),
        ];
        for (field, sent) in fields {
            if let Some(sent) = sent {
                *field = sent;
            }
        }
    }

    /// Heron's usage, whose input counts cached and cache-written tokens too.
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input.saturating_add(self.cache_read).saturating_add(self.cache_creation),
            output_tokens: self.output,
            cached_input_tokens: self.cache_read,
            cache_write_input_tokens: self.cache_creation,
            reasoning_tokens: 0,
        }
    }
}

/// A content block whose pieces are still arriving.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse { id: String, name: String, input: String },
    Thinking { thinking: String, signature: String },
    RedactedThinking { data: String },
    Other,
}

/// Where a block index stands.
#[derive(Debug)]
enum Slot {
    Open(Block),
    Stopped,
}

/// Folds the events of one streamed message into [`ModelEvent`]s.
#[derive(Debug, Default)]
pub(crate) struct MessageAssembler {
    /// Every block index the stream started, bounded by [`MAX_BLOCKS`].
    blocks: BTreeMap<usize, Slot>,
    /// Stopped thinking blocks by index, as they go back to Anthropic.
    thinking: BTreeMap<usize, Value>,
    /// Bytes of thinking held, open blocks and kept ones, bounded by [`MAX_REASONING_BYTES`].
    reasoning_bytes: usize,
    /// Set once the reasoning grew past its bound: none is kept from then on.
    reasoning_dropped: bool,
    /// Tool use blocks started, bounded by [`MAX_TOOL_CALLS`].
    tool_blocks: usize,
    /// Tool calls sent out, which decide the finish reason.
    calls_made: usize,
    /// The stop reason of `message_delta`; once set, the answer has finished.
    stop_reason: Option<String>,
    /// Usage, once the stream sent any.
    counts: Option<Counts>,
}

impl MessageAssembler {
    /// Folds in one `data:` payload, pushing the events it completes onto `out`.
    pub(crate) fn push(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Result<Progress, ProviderError> {
        // A proxy may send an empty keep-alive event.
        if data.trim().is_empty() {
            return Ok(Progress::More);
        }
        let event: Event = serde_json::from_str(data).map_err(|error| {
            ProviderError::Protocol(format!("a stream event is not the expected JSON ({error})"))
        })?;
        match event {
            Event::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.counts.get_or_insert_with(Counts::default).update(usage);
                }
            }
            Event::ContentBlockStart { index, content_block } => self.start(index, content_block, out)?,
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, out)?,
            Event::ContentBlockStop { index } => self.stop(index, out)?,
            Event::MessageDelta { delta, usage } => {
                if let Some(usage) = usage {
                    self.counts.get_or_insert_with(Counts::default).update(usage);
                }
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
            }
            Event::MessageStop => return Ok(Progress::Done),
            Event::Error { error } => return Err(stream_error(&error)),
            Event::Other => {}
        }
        Ok(Progress::More)
    }

    fn start(
        &mut self,
        index: usize,
        started: StartedBlock,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ProviderError> {
        if self.blocks.contains_key(&index) {
            return Err(ProviderError::Protocol(format!("content block {index} started twice")));
        }
        if self.blocks.len() >= MAX_BLOCKS {
            return Err(ProviderError::Protocol(format!(
                "the message has more than {MAX_BLOCKS} content blocks"
            )));
        }
        let block = match started {
            StartedBlock::Text { text } => {
                push_text(out, text);
                Block::Text
            }
            StartedBlock::ToolUse { id, name, input } => {
                self.tool_blocks += 1;
                if self.tool_blocks > MAX_TOOL_CALLS {
                    return Err(ProviderError::Protocol(format!(
                        "the model made more than {MAX_TOOL_CALLS} tool calls in one message"
                    )));
                }
                // The turn pairs a call with its result by id, so each needs one.
                let id = if id.is_empty() { format!("toolu_{}", uuid::Uuid::new_v4().simple()) } else { id };
                let (id, name) = (tool_identity("id", id)?, tool_identity("name", name)?);
                // The input streams as JSON text; one sent whole in the start is its text.
                let input = match input {
                    Value::Object(fields) if !fields.is_empty() => Value::Object(fields).to_string(),
                    _ => String::new(),
                };
                Block::ToolUse { id, name, input: clipped(String::new(), &input) }
            }
            StartedBlock::Thinking { thinking, signature } => {
                push_thought(out, thinking.clone());
                Block::Thinking { thinking, signature }
            }
            StartedBlock::RedactedThinking { data } => Block::RedactedThinking { data },
            StartedBlock::Other => Block::Other,
        };
        let reasoning = match &block {
            Block::Thinking { thinking, signature } => thinking.len() + signature.len(),
            Block::RedactedThinking { data } => data.len(),
            _ => 0,
        };
        self.blocks.insert(index, Slot::Open(block));
        self.count_reasoning(reasoning);
        Ok(())
    }

    fn delta(&mut self, index: usize, delta: Delta, out: &mut Vec<ModelEvent>) -> Result<(), ProviderError> {
        let keep = !self.reasoning_dropped;
        let block = self.open_block(index)?;
        let kept = match (block, delta) {
            (_, Delta::Other) | (Block::Other, _) => 0,
            (Block::Text, Delta::Text { text }) => {
                push_text(out, text);
                0
            }
            (Block::ToolUse { input, .. }, Delta::InputJson { partial_json }) => {
                *input = clipped(std::mem::take(input), &partial_json);
                0
            }
            (Block::Thinking { thinking, .. }, Delta::Thinking { thinking: piece }) => {
                let added = if keep { piece.len() } else { 0 };
                if keep {
                    thinking.push_str(&piece);
                }
                push_thought(out, piece);
                added
            }
            (Block::Thinking { signature, .. }, Delta::Signature { signature: piece }) if keep => {
                signature.push_str(&piece);
                piece.len()
            }
            (Block::Thinking { .. }, Delta::Signature { .. }) => 0,
            (block, delta) => {
                return Err(ProviderError::Protocol(format!(
                    "content block {index} ({}) got a {} delta",
                    block.kind(),
                    delta.kind()
                )));
            }
        };
        self.count_reasoning(kept);
        Ok(())
    }

    fn stop(&mut self, index: usize, out: &mut Vec<ModelEvent>) -> Result<(), ProviderError> {
        self.open_block(index)?;
        if let Some(Slot::Open(block)) = self.blocks.insert(index, Slot::Stopped) {
            self.close(index, block, out);
        }
        Ok(())
    }

    /// The open block at `index`, or why there is none.
    fn open_block(&mut self, index: usize) -> Result<&mut Block, ProviderError> {
        match self.blocks.get_mut(&index) {
            Some(Slot::Open(block)) => Ok(block),
            Some(Slot::Stopped) => {
                Err(ProviderError::Protocol(format!("content block {index} already stopped")))
            }
            None => Err(ProviderError::Protocol(format!("content block {index} was never started"))),
        }
    }

    /// A finished block: a tool call goes out, a signed thinking block is kept.
    fn close(&mut self, index: usize, block: Block, out: &mut Vec<ModelEvent>) {
        match block {
            Block::ToolUse { id, name, input } => {
                let arguments = if input.trim().is_empty() { "{}".to_owned() } else { input };
                out.push(ModelEvent::ToolCall { call: ToolCallRequest { id, name, arguments } });
                self.calls_made += 1;
            }
            _ if self.reasoning_dropped => {}
            // Anthropic refuses a thinking block without its signature, so none is kept.
            Block::Thinking { thinking, signature } if !signature.is_empty() => {
                let block = json!({ "type": "thinking", "thinking": thinking, "signature": signature });
                self.thinking.insert(index, block);
            }
            Block::RedactedThinking { data } => {
                self.thinking.insert(index, json!({ "type": "redacted_thinking", "data": data }));
            }
            Block::Text | Block::Thinking { .. } | Block::Other => {}
        }
    }

    /// Counts reasoning bytes held for the next request; past the bound none are held.
    fn count_reasoning(&mut self, bytes: usize) {
        self.reasoning_bytes = self.reasoning_bytes.saturating_add(bytes);
        if self.reasoning_bytes <= MAX_REASONING_BYTES || self.reasoning_dropped {
            return;
        }
        self.reasoning_dropped = true;
        self.thinking.clear();
        for slot in self.blocks.values_mut() {
            match slot {
                Slot::Open(Block::Thinking { thinking, signature }) => {
                    *thinking = String::new();
                    *signature = String::new();
                }
                Slot::Open(Block::RedactedThinking { data }) => *data = String::new(),
                _ => {}
            }
        }
    }

    /// Why the model stopped. A message that called tools finishes with them whatever its
    /// stop reason says, since the calls went out and wait for their results.
    fn finish_reason(&self) -> FinishReason {
        match self.stop_reason.as_deref() {
            Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
            Some("refusal") => FinishReason::Refusal,
            _ if self.calls_made > 0 => FinishReason::ToolCalls,
            Some("tool_use") => FinishReason::ToolCalls,
            // `end_turn`, `stop_sequence`, and `pause_turn`: a server tool (which Heron does
            // not offer) paused a long turn, so what came is the whole answer Heron gets.
            _ => FinishReason::Stop,
        }
    }

    /// Ends the stream: blocks left open (their calls go out), the thinking blocks, then
    /// usage, then `Finish`.
    pub(crate) fn finish(mut self, out: &mut Vec<ModelEvent>) {
        let open: Vec<(usize, Block)> = std::mem::take(&mut self.blocks)
            .into_iter()
            .filter_map(|(index, slot)| match slot {
                Slot::Open(block) => Some((index, block)),
                Slot::Stopped => None,
            })
            .collect();
        for (index, block) in open {
            self.close(index, block, out);
        }
        let reason = self.finish_reason();
        let details = std::mem::take(&mut self.thinking).into_values().collect();
        crate::llm::end_events(out, details, self.counts.as_ref().map(|c| c.usage()), reason);
    }
}

impl Block {
    fn kind(&self) -> &'static str {
        match self {
            Block::Text => "text",
            Block::ToolUse { .. } => "tool_use",
            Block::Thinking { .. } => "thinking",
            Block::RedactedThinking { .. } => "redacted_thinking",
            Block::Other => "other",
        }
    }
}

impl Delta {
    fn kind(&self) -> &'static str {
        match self {
            Delta::Text { .. } => "text_delta",
            Delta::InputJson { .. } => "input_json_delta",
            Delta::Thinking { .. } => "thinking_delta",
            Delta::Signature { .. } => "signature_delta",
            Delta::Other => "other",
        }
    }
}

impl Fold for MessageAssembler {
    fn push_payload(
        &mut self,
        payload: &Payload,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Progress, ProviderError> {
        match payload {
            Payload::Data(data) => self.push(data, out),
            Payload::Error(text) => Err(error_event(text)),
        }
    }

    fn has_finished(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn finish(self, out: &mut Vec<ModelEvent>) {
        MessageAssembler::finish(self, out)
    }
}

fn push_text(out: &mut Vec<ModelEvent>, text: String) {
    if !text.is_empty() {
        out.push(ModelEvent::TextDelta { text });
    }
}

fn push_thought(out: &mut Vec<ModelEvent>, text: String) {
    if !text.is_empty() {
        out.push(ModelEvent::ThoughtDelta { text });
    }
}

/// `held` with `piece` appended, up to one byte past the call input bound: enough for the
/// turn to refuse the call without holding what a runaway model keeps sending.
fn clipped(mut held: String, piece: &str) -> String {
    crate::llm::push_arguments(&mut held, piece);
    held
}

/// The status Anthropic documents for an error type, so that what the stream reports reads
/// like the same failure at the HTTP level; an unknown type is a bad gateway.
fn status_of(error_type: &str) -> u16 {
    match error_type {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => 502,
    }
}

/// An error object of the stream (`{"type": "overloaded_error", "message": ...}`), as the
/// server's own message under the status of its type.
fn stream_error(error: &Value) -> ProviderError {
    let error_type = error.get("type").and_then(Value::as_str).unwrap_or("");
    let message = match error.get("message").and_then(Value::as_str) {
        Some(message) if !message.trim().is_empty() => message.to_owned(),
        _ if !error_type.is_empty() => error_type.to_owned(),
        _ => "the server sent an error event".to_owned(),
    };
    ProviderError::Status { status: status_of(error_type), message }
}

/// An `event: error` event: its JSON error (wrapped in `error` or not), else its text.
fn error_event(text: &str) -> ProviderError {
    match serde_json::from_str::<Value>(text) {
        Ok(value) if value.is_object() => stream_error(value.get("error").unwrap_or(&value)),
        _ if text.trim().is_empty() => {
            ProviderError::Status { status: 502, message: "the server sent an error event".into() }
        }
        _ => ProviderError::Status { status: 502, message: text.trim().to_owned() },
    }
}

#[cfg(test)]
mod tests;
