//! The OpenAI Chat Completions wire format: the request body built from a
//! [`ModelRequest`], and [`ChunkAssembler`], which folds streamed chunks into
//! [`ModelEvent`]s. Pure data handling; no I/O, so every quirk is testable in isolation.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::llm::{
    ChatMessage, FinishReason, ModelEvent, ModelRequest, ProviderError, ToolCallRequest, Usage, UserPart,
};

/// The JSON body of a streamed chat completion request.
pub(crate) fn request_body(request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), request.messages.iter().map(message).collect());
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({ "include_usage": true }));
    if !request.tools.is_empty() {
        let tools = request.tools.iter().map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            })
        });
        body.insert("tools".into(), tools.collect());
    }
    if let Some(effort) = &request.effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    if let Some(max_tokens) = request.max_tokens {
        body.insert("max_tokens".into(), json!(max_tokens));
    }
    Value::Object(body)
}

fn message(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System { text } => json!({ "role": "system", "content": text }),
        ChatMessage::User { parts } => json!({ "role": "user", "content": user_content(parts) }),
        ChatMessage::Assistant { text, tool_calls } if tool_calls.is_empty() => {
            json!({ "role": "assistant", "content": text })
        }
        ChatMessage::Assistant { text, tool_calls } => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect();
            // Several servers reject an empty string next to tool calls; null is the norm.
            let content = if text.is_empty() { Value::Null } else { json!(text) };
            json!({ "role": "assistant", "content": content, "tool_calls": calls })
        }
        ChatMessage::Tool { call_id, content } => {
            json!({ "role": "tool", "tool_call_id": call_id, "content": content })
        }
    }
}

/// Text-only content goes as one string, which every compatible server accepts; content
/// with images goes as the array of typed parts.
fn user_content(parts: &[UserPart]) -> Value {
    let has_image = parts.iter().any(|part| matches!(part, UserPart::Image { .. }));
    if !has_image {
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|part| match part {
                UserPart::Text { text } => Some(text.as_str()),
                UserPart::Image { .. } => None,
            })
            .collect();
        return json!(texts.join("\n\n"));
    }
    parts
        .iter()
        .map(|part| match part {
            UserPart::Text { text } => json!({ "type": "text", "text": text }),
            UserPart::Image { mime_type, data } => json!({
                "type": "image_url",
                "image_url": { "url": format!("data:{mime_type};base64,{data}") },
            }),
        })
        .collect()
}

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
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    content: Option<String>,
    /// DeepSeek and vLLM.
    reasoning_content: Option<String>,
    /// OpenRouter.
    reasoning: Option<String>,
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
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
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
        Usage {
            input_tokens: wire.prompt_tokens.unwrap_or(0),
            output_tokens: wire.completion_tokens.unwrap_or(0),
            cached_input_tokens: wire.prompt_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0),
            reasoning_tokens: wire.completion_tokens_details.and_then(|d| d.reasoning_tokens).unwrap_or(0),
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

/// Whether the stream goes on after a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// More payloads may follow.
    More,
    /// The `[DONE]` sentinel arrived.
    Done,
}

/// Folds the payloads of one streamed completion into events. Text and reasoning go out as
/// they come; tool calls go out whole when the choice finishes; usage and `Finish` go out
/// last, from [`ChunkAssembler::finish`].
#[derive(Debug, Default)]
pub(crate) struct ChunkAssembler {
    /// Tool calls by their stream index.
    calls: BTreeMap<u32, PartialCall>,
    /// How many tool calls have gone out.
    calls_made: usize,
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

    /// Folds in one `data:` payload, pushing the events it completes onto `out`.
    pub(crate) fn push(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Result<Progress, ProviderError> {
        if data.trim() == "[DONE]" {
            return Ok(Progress::Done);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|error| {
            ProviderError::Protocol(format!("a stream chunk is not the expected JSON ({error})"))
        })?;
        if let Some(error) = chunk.error {
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
        if let Some(delta) = choice.delta {
            self.push_delta(delta, out);
        }
        if let Some(reason) = choice.finish_reason {
            self.emit_calls(out);
            self.finish = Some(self.finish_reason(&reason));
        }
        Ok(Progress::More)
    }

    fn push_delta(&mut self, delta: Delta, out: &mut Vec<ModelEvent>) {
        // Some servers send the same reasoning under both names; one is enough.
        if let Some(thought) = delta.reasoning_content.or(delta.reasoning).filter(|t| !t.is_empty()) {
            out.push(ModelEvent::ThoughtDelta { text: thought });
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            out.push(ModelEvent::TextDelta { text });
        }
        if let Some(refusal) = delta.refusal.filter(|t| !t.is_empty()) {
            // The refusal is what the model says instead of an answer, so it is shown.
            self.refused = true;
            out.push(ModelEvent::TextDelta { text: refusal });
        }
        for (position, piece) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            // Servers that send whole calls without an index list them in order.
            let index = piece.index.unwrap_or(position as u32);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = piece.id.filter(|id| !id.is_empty()) {
                call.id = id;
            }
            if let Some(function) = piece.function {
                if let Some(name) = function.name.filter(|name| !name.is_empty()) {
                    call.name = name;
                }
                if let Some(arguments) = function.arguments {
                    // Past the cap, one byte more is kept: enough for the turn to refuse the
                    // call without holding what a runaway model keeps sending.
                    let room = (crate::llm::MAX_TOOL_ARGUMENT_BYTES + 1).saturating_sub(call.arguments.len());
                    let mut end = room.min(arguments.len());
                    while !arguments.is_char_boundary(end) {
                        end -= 1;
                    }
                    call.arguments.push_str(&arguments[..end]);
                }
            }
        }
    }

    fn emit_calls(&mut self, out: &mut Vec<ModelEvent>) {
        for (_, call) in std::mem::take(&mut self.calls) {
            let id =
                if call.id.is_empty() { format!("call_{}", uuid::Uuid::new_v4().simple()) } else { call.id };
            let arguments = if call.arguments.trim().is_empty() { "{}".to_owned() } else { call.arguments };
            out.push(ModelEvent::ToolCall { call: ToolCallRequest { id, name: call.name, arguments } });
            self.calls_made += 1;
        }
    }

    fn finish_reason(&self, reason: &str) -> FinishReason {
        match reason {
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::Refusal,
            // Some servers say `stop` even when the answer is tool calls; the calls decide.
            _ if self.calls_made > 0 => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        }
    }

    /// Ends the stream: tool calls still open, then usage, then `Finish`. A stream that
    /// ended without a finish reason finished with its tool calls if it made any.
    pub(crate) fn finish(mut self, out: &mut Vec<ModelEvent>) {
        self.emit_calls(out);
        let reason = match self.finish {
            _ if self.refused => FinishReason::Refusal,
            Some(reason) => reason,
            None if self.calls_made > 0 => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        if let Some(usage) = self.usage {
            out.push(ModelEvent::Usage { usage });
        }
        out.push(ModelEvent::Finish { reason });
    }
}

/// An error object sent inside the stream (OpenRouter does this when an upstream fails
/// after the response began).
fn stream_error(error: &Value) -> ProviderError {
    let message =
        error.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| error.to_string());
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..600).contains(code))
        .unwrap_or(502);
    ProviderError::Status { status, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(payloads: &[&str]) -> Vec<ModelEvent> {
        let mut assembler = ChunkAssembler::default();
        let mut out = Vec::new();
        for payload in payloads {
            if assembler.push(payload, &mut out).expect("valid payload") == Progress::Done {
                break;
            }
        }
        assembler.finish(&mut out);
        out
    }

    #[test]
    fn stop_with_tool_calls_counts_as_tool_calls() {
        let events = run(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ]);
        assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
    }

    #[test]
    fn reasoning_under_both_names_is_emitted_once() {
        let events = run(&[r#"{"choices":[{"delta":{"reasoning_content":"hm","reasoning":"hm"}}]}"#]);
        assert_eq!(
            events,
            [
                ModelEvent::ThoughtDelta { text: "hm".into() },
                ModelEvent::Finish { reason: FinishReason::Stop }
            ]
        );
    }

    #[test]
    fn a_refusal_delta_finishes_as_refusal() {
        let events = run(&[
            r#"{"choices":[{"delta":{"refusal":"I can't."}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ]);
        assert_eq!(
            events,
            [
                ModelEvent::TextDelta { text: "I can't.".into() },
                ModelEvent::Finish { reason: FinishReason::Refusal }
            ]
        );
    }

    #[test]
    fn content_filter_is_a_refusal_and_length_is_length() {
        let filtered = run(&[r#"{"choices":[{"delta":{},"finish_reason":"content_filter"}]}"#]);
        assert_eq!(filtered.last(), Some(&ModelEvent::Finish { reason: FinishReason::Refusal }));
        let cut = run(&[r#"{"choices":[{"delta":{"content":"a"},"finish_reason":"length"}]}"#]);
        assert_eq!(cut.last(), Some(&ModelEvent::Finish { reason: FinishReason::Length }));
    }

    #[test]
    fn nulls_are_read_as_absent() {
        let events = run(&[
            r#"{"choices":null,"usage":null}"#,
            r#"{"choices":[{"delta":{"content":null,"tool_calls":null},"finish_reason":null}]}"#,
        ]);
        assert_eq!(events, [ModelEvent::Finish { reason: FinishReason::Stop }]);
    }

    #[test]
    fn an_error_chunk_fails_with_its_message() {
        let mut assembler = ChunkAssembler::default();
        let failure = assembler.push(r#"{"error":{"message":"upstream died","code":503}}"#, &mut Vec::new());
        assert_eq!(failure, Err(ProviderError::Status { status: 503, message: "upstream died".into() }));
    }

    #[test]
    fn a_stream_without_finish_reason_finishes_by_its_tool_calls() {
        let with_calls = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f"}}]}}]}"#,
        ]);
        assert_eq!(
            with_calls,
            [
                ModelEvent::ToolCall {
                    call: ToolCallRequest { id: "a".into(), name: "f".into(), arguments: "{}".into() }
                },
                ModelEvent::Finish { reason: FinishReason::ToolCalls }
            ]
        );
        let without = run(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#]);
        assert_eq!(without.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
    }

    #[test]
    fn user_text_parts_join_into_one_string_without_images() {
        let parts = [UserPart::Text { text: "a".into() }, UserPart::Text { text: "b".into() }];
        assert_eq!(user_content(&parts), json!("a\n\nb"));
    }
}
