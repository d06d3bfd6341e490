//! The model server's answer as OpenAI Chat Completions streams it: `chat.completion.chunk`
//! events, reasoning as `reasoning_content`, each tool call whole in one delta, usage in a
//! chunk of its own, then `data: [DONE]`.

use heron_core::llm::{FinishReason, ModelEvent, ProviderError};
use serde_json::{Value, json};

use super::data;

/// One answer's chunks.
pub(super) struct Chunks {
    id: String,
    model: String,
    /// Tool calls so far, for each one's index.
    calls: usize,
}

impl Chunks {
    pub(super) fn new(model: &str) -> Self {
        Self { id: format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()), model: model.to_owned(), calls: 0 }
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> String {
        data(&json!({
            "id": self.id, "object": "chat.completion.chunk", "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
        }))
    }

    pub(super) fn event(&mut self, event: &ModelEvent) -> String {
        match event {
            ModelEvent::TextDelta { text } => {
                self.chunk(json!({ "role": "assistant", "content": text }), None)
            }
            ModelEvent::ThoughtDelta { text } => {
                self.chunk(json!({ "role": "assistant", "reasoning_content": text }), None)
            }
            ModelEvent::ToolCall { call } => {
                let index = self.calls;
                self.calls += 1;
                let function = json!({ "name": call.name, "arguments": call.arguments });
                self.chunk(json!({ "tool_calls": [{ "index": index, "id": call.id, "type": "function", "function": function }] }), None)
            }
            ModelEvent::Usage { usage } => data(&json!({
                "id": self.id, "object": "chat.completion.chunk", "model": self.model, "choices": [],
                "usage": {
                    "prompt_tokens": usage.input_tokens,
                    "completion_tokens": usage.output_tokens,
                    "total_tokens": usage.input_tokens + usage.output_tokens,
                },
            })),
            ModelEvent::Finish { reason } => {
                let finish = match reason {
                    FinishReason::Stop => "stop",
                    FinishReason::ToolCalls => "tool_calls",
                    FinishReason::Length => "length",
                    FinishReason::Refusal => "content_filter",
                };
                self.chunk(json!({}), Some(finish))
            }
            ModelEvent::Attempt { .. }
            | ModelEvent::Retrying { .. }
            | ModelEvent::ReasoningDetails { .. } => String::new(),
        }
    }

    /// A script's `error` step, as servers report an error inside the stream.
    pub(super) fn error(&mut self, error: &ProviderError) -> String {
        data(&json!({ "error": { "message": error.to_string(), "type": "server_error" } }))
    }

    pub(super) fn end(&mut self) -> String {
        "data: [DONE]\n\n".to_owned()
    }
}
