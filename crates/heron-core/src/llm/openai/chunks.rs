//! Folds the streamed payloads of one Chat Completions response into [`ModelEvent`]s, with
//! the quirks of the servers people run: tool calls keyed by id where servers reuse an
//! index, arguments sent as objects, finish reasons beyond OpenAI's, and errors sent inside
//! a 200 stream. Pure data handling; no I/O, so every quirk is testable in isolation.
//!
//! Every error a server sends in the stream fails the turn with the server's own reason
//! (the caller redacts and clips it); none is read as an empty answer.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::llm::http::{Fold, Progress};
use crate::llm::sse::Payload;
use crate::llm::{FinishReason, ModelEvent, ProviderError, ToolCallRequest, Usage, tool_identity};

/// The most tool calls one response may make; a stream past it is malformed.
const MAX_TOOL_CALLS: usize = 256;

/// The most bytes of structured reasoning kept; past it none is kept, since a cut
/// signature is worse than none.
const MAX_REASONING_DETAILS_BYTES: usize = 8 * 1024 * 1024;

/// One `data:` payload of the stream. Every field is optional and `null` is read as
/// absent: compatible servers differ in what they leave out.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Chunk {
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice {
    index: Option<u32>,
    /// Some servers put the error of a failed choice here rather than at the top.
    error: Option<Value>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    /// Text, or (Mistral's reasoning models) an array of typed parts: `text`, and `thinking`
    /// whose own parts hold the thoughts.
    content: Option<Value>,
    /// DeepSeek and vLLM.
    reasoning_content: Option<String>,
    /// OpenRouter.
    reasoning: Option<String>,
    /// OpenRouter's structured reasoning, which it wants back verbatim.
    reasoning_details: Option<Vec<Value>>,
    refusal: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ToolCallDelta {
    index: Option<u32>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FunctionDelta {
    name: Option<String>,
    /// A string piece of JSON text, or (llama.cpp) the arguments as a JSON object.
    arguments: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek counts its prompt cache here rather than in `prompt_tokens_details`: the
    /// prompt tokens it served from the cache, and the ones it did not.
    prompt_cache_hit_tokens: Option<u64>,
    prompt_cache_miss_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(wire: WireUsage) -> Self {
        let hits = wire.prompt_cache_hit_tokens;
        // DeepSeek's prompt is its hits and misses; a server that sends only those still
        // said how long the prompt was.
        let split = hits.zip(wire.prompt_cache_miss_tokens).map(|(hit, miss)| hit.saturating_add(miss));
        let cached = wire.prompt_tokens_details.and_then(|d| d.cached_tokens).or(hits);
        Usage {
            input_tokens: wire.prompt_tokens.or(split).unwrap_or(0),
            output_tokens: wire.completion_tokens.unwrap_or(0),
            cached_input_tokens: cached.unwrap_or(0),
            reasoning_tokens: wire.completion_tokens_details.and_then(|d| d.reasoning_tokens).unwrap_or(0),
            cache_write_input_tokens: 0,
        }
    }
}

/// A tool call whose pieces are still arriving.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl PartialCall {
    /// Appends a piece of arguments. Past the cap, one byte more is kept: enough for the
    /// turn to refuse the call without holding what a runaway model keeps sending.
    fn push_arguments(&mut self, piece: &str) {
        crate::llm::push_arguments(&mut self.arguments, piece);
    }
}

/// Folds the payloads of one streamed completion into events. Text and reasoning go out as
/// they come; tool calls and structured reasoning go out whole when the choice finishes;
/// usage and `Finish` go out last, from [`ChunkAssembler::finish`].
#[derive(Debug, Default)]
pub(crate) struct ChunkAssembler {
    /// Tool calls in the order they began.
    calls: Vec<PartialCall>,
    /// The call each stream index feeds now: Ollama and LiteLLM send parallel calls all at
    /// index 0, told apart only by their ids.
    open: BTreeMap<u32, usize>,
    /// How many tool calls have gone out.
    calls_made: usize,
    /// Structured reasoning, merged across deltas.
    details: Vec<Value>,
    details_bytes: usize,
    /// The finish reason of choice 0, once it arrived.
    finish: Option<FinishReason>,
    refused: bool,
    usage: Option<Usage>,
}

impl ChunkAssembler {
    /// Whether choice 0 has finished (what may follow is usage and `[DONE]`).
    pub(crate) fn has_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// Folds in one event of the stream, pushing the events it completes onto `out`.
    pub(crate) fn push_payload(
        &mut self,
        payload: &Payload,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Progress, ProviderError> {
        match payload {
            Payload::Data(data) => self.push(data, out),
            Payload::Error(text) => Err(error_event(text)),
        }
    }

    /// Folds in one `data:` payload, pushing the events it completes onto `out`.
    pub(crate) fn push(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Result<Progress, ProviderError> {
        if data.trim() == "[DONE]" {
            return Ok(Progress::Done);
        }
        // Some servers send keep-alive events with empty data.
        if data.trim().is_empty() {
            return Ok(Progress::More);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|error| {
            ProviderError::Protocol(format!("a stream chunk is not the expected JSON ({error})"))
        })?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(stream_error(&error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        let choices = chunk.choices.unwrap_or_default();
        // Only the first choice is asked for; a server that sends more is ignored past it.
        let Some(choice) = choices.into_iter().find(|choice| choice.index.unwrap_or(0) == 0) else {
            return Ok(Progress::More);
        };
        if let Some(error) = choice.error.filter(|e| !e.is_null()) {
            return Err(stream_error(&error));
        }
        if let Some(delta) = choice.delta {
            self.push_delta(delta, out)?;
        }
        if let Some(reason) = choice.finish_reason {
            if reason == "error" {
                // OpenRouter ends a choice whose upstream failed this way; its error member,
                // when sent, was read above.
                return Err(ProviderError::Status {
                    status: 502,
                    message: "the model stopped with finish reason `error`".into(),
                });
            }
            self.emit_calls(out);
            self.finish = Some(self.finish_reason(&reason));
        }
        Ok(Progress::More)
    }

    fn push_delta(&mut self, delta: Delta, out: &mut Vec<ModelEvent>) -> Result<(), ProviderError> {
        // Some servers send the same reasoning under both names; one is enough.
        if let Some(thought) = delta.reasoning_content.or(delta.reasoning).filter(|t| !t.is_empty()) {
            out.push(ModelEvent::ThoughtDelta { text: thought });
        }
        match delta.content {
            Some(Value::String(text)) if !text.is_empty() => out.push(ModelEvent::TextDelta { text }),
            Some(Value::Array(parts)) => content_parts(parts, out),
            _ => {}
        }
        if let Some(refusal) = delta.refusal.filter(|t| !t.is_empty()) {
            // The refusal is what the model says instead of an answer, so it is shown.
            self.refused = true;
            out.push(ModelEvent::TextDelta { text: refusal });
        }
        for detail in delta.reasoning_details.unwrap_or_default() {
            self.push_detail(detail);
        }
        for (position, piece) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            // Servers that send whole calls without an index list them in order.
            let index = piece.index.unwrap_or(position as u32);
            let id = piece.id.filter(|id| !id.is_empty()).map(|id| tool_identity("id", id)).transpose()?;
            let at = match self.open.get(&index) {
                // A different id at an open index is a new call, not more of the old one.
                Some(&at)
                    if id
                        .as_ref()
                        .is_some_and(|id| !self.calls[at].id.is_empty() && *id != self.calls[at].id) =>
                {
                    None
                }
                Some(&at) => Some(at),
                None => None,
            };
            let at = match at {
                Some(at) => at,
                None => {
                    if self.calls.len() >= MAX_TOOL_CALLS {
                        return Err(ProviderError::Protocol(format!(
                            "the model made more than {MAX_TOOL_CALLS} tool calls in one response"
                        )));
                    }
                    self.calls.push(PartialCall::default());
                    self.open.insert(index, self.calls.len() - 1);
                    self.calls.len() - 1
                }
            };
            let call = &mut self.calls[at];
            if let Some(id) = id {
                call.id = id;
            }
            if let Some(function) = piece.function {
                if let Some(name) = function.name.filter(|name| !name.is_empty()) {
                    call.name = tool_identity("name", name)?;
                }
                match function.arguments {
                    None | Some(Value::Null) => {}
                    Some(Value::String(text)) => call.push_arguments(&text),
                    // llama.cpp may send the arguments as the object itself: its JSON text is
                    // what a string would have held.
                    Some(other) => call.push_arguments(&other.to_string()),
                }
            }
        }
        Ok(())
    }

    /// Merges one piece of structured reasoning: a piece of the same type and index as the
    /// last one continues it (its text fields append, other fields fill in), any other
    /// starts a new entry.
    fn push_detail(&mut self, detail: Value) {
        let Value::Object(detail) = detail else { return };
        if self.details_bytes > MAX_REASONING_DETAILS_BYTES {
            return;
        }
        self.details_bytes += detail.iter().map(|(k, v)| k.len() + v.to_string().len()).sum::<usize>();
        if self.details_bytes > MAX_REASONING_DETAILS_BYTES {
            self.details.clear();
            return;
        }
        let same = |last: &Map<String, Value>| {
            last.get("type") == detail.get("type") && last.get("index") == detail.get("index")
        };
        match self.details.last_mut() {
            Some(Value::Object(last)) if same(last) => {
                for (key, value) in detail {
                    match (last.get_mut(&key), value) {
                        (_, Value::Null) => {}
                        (Some(Value::String(text)), Value::String(more))
                            if matches!(key.as_str(), "text" | "summary" | "data") =>
                        {
                            text.push_str(&more)
                        }
                        (_, value) => {
                            last.insert(key, value);
                        }
                    }
                }
            }
            _ => self.details.push(Value::Object(detail)),
        }
    }

    fn emit_calls(&mut self, out: &mut Vec<ModelEvent>) {
        self.open.clear();
        for call in std::mem::take(&mut self.calls) {
            let id =
                if call.id.is_empty() { format!("call_{}", uuid::Uuid::new_v4().simple()) } else { call.id };
            let arguments = if call.arguments.trim().is_empty() { "{}".to_owned() } else { call.arguments };
            out.push(ModelEvent::ToolCall { call: ToolCallRequest { id, name: call.name, arguments } });
            self.calls_made += 1;
        }
    }

    fn finish_reason(&self, reason: &str) -> FinishReason {
        match reason {
            "length" | "max_tokens" => FinishReason::Length,
            "content_filter" => FinishReason::Refusal,
            // Some servers say `stop` (or llama.cpp's `eos`) even when the answer is tool
            // calls; the calls decide.
            _ if self.calls_made > 0 => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        }
    }

    /// Ends the stream: tool calls still open, structured reasoning, then usage, then
    /// `Finish`. A stream that said `[DONE]` without a finish reason finished with its tool
    /// calls if it made any (the HTTP layer never lets one that said neither get here).
    pub(crate) fn finish(mut self, out: &mut Vec<ModelEvent>) {
        self.emit_calls(out);
        let reason = match self.finish {
            _ if self.refused => FinishReason::Refusal,
            Some(reason) => reason,
            None if self.calls_made > 0 => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        crate::llm::end_events(out, self.details, self.usage, reason);
    }
}

impl Fold for ChunkAssembler {
    fn push_payload(
        &mut self,
        payload: &Payload,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Progress, ProviderError> {
        ChunkAssembler::push_payload(self, payload, out)
    }

    fn has_finished(&self) -> bool {
        ChunkAssembler::has_finished(self)
    }

    fn finish(self, out: &mut Vec<ModelEvent>) {
        ChunkAssembler::finish(self, out)
    }
}

/// The typed parts of an array `content`, in order: `text` parts are the answer, the parts
/// of a `thinking` part (or its text) are thoughts; other parts (references, images) carry
/// nothing to show.
fn content_parts(parts: Vec<Value>, out: &mut Vec<ModelEvent>) {
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = part.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta { text: text.to_owned() });
                }
            }
            Some("thinking") => {
                let thought = match part.get("thinking") {
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Array(inner)) => {
                        inner.iter().filter_map(|piece| piece.get("text").and_then(Value::as_str)).collect()
                    }
                    _ => String::new(),
                };
                if !thought.is_empty() {
                    out.push(ModelEvent::ThoughtDelta { text: thought });
                }
            }
            _ => {}
        }
    }
}

/// An error object sent inside the stream (OpenRouter does this when an upstream fails
/// after the response began): its message, with the upstream's own words when OpenRouter
/// passes them on in `metadata.raw`.
fn stream_error(error: &Value) -> ProviderError {
    let mut message = match error.get("message") {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => error.as_str().map_or_else(|| error.to_string(), str::to_owned),
    };
    match error.get("metadata").and_then(|m| m.get("raw")) {
        Some(Value::String(raw)) if !raw.is_empty() => message = format!("{message}: {raw}"),
        Some(raw) if !raw.is_null() => message = format!("{message}: {raw}"),
        _ => {}
    }
    let status = error
        .get("code")
        .and_then(|code| code.as_u64().or_else(|| code.as_str().and_then(|c| c.parse().ok())))
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..600).contains(code))
        .unwrap_or(502);
    ProviderError::Status { status, message }
}

/// An `event: error` event or a bare `error:` field: its JSON error object when it is one
/// (wrapped in `error` or not), else its text.
fn error_event(text: &str) -> ProviderError {
    match serde_json::from_str::<Value>(text) {
        Ok(value) if value.is_object() => stream_error(value.get("error").unwrap_or(&value)),
        Ok(Value::String(text)) => ProviderError::Status { status: 502, message: text },
        _ if text.trim().is_empty() => {
            ProviderError::Status { status: 502, message: "the server sent an error event".into() }
        }
        _ => ProviderError::Status { status: 502, message: text.trim().to_owned() },
    }
}

#[cfg(test)]
mod tests;
