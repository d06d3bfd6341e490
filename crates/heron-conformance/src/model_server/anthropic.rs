//! The model server's answer as Anthropic's Messages API streams it: `message_start`, one
//! content block per run of text, thinking or tool use (each opened, filled by deltas and
//! stopped), `message_delta` with the stop reason and usage, then `message_stop`.

use heron_core::llm::{FinishReason, ModelEvent, ProviderError};
use serde_json::{Value, json};

/// The kind of the content block open now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

/// One answer's events.
pub(super) struct Events {
    model: String,
    started: bool,
    /// The next block's index.
    index: usize,
    open: Option<Open>,
    output_tokens: u64,
    stop: &'static str,
}

/// One event, named by its type as Anthropic names them.
fn event(value: &Value) -> String {
    format!("event: {}\ndata: {value}\n\n", value["type"].as_str().unwrap_or("message"))
}

impl Events {
    pub(super) fn new(model: &str) -> Self {
        Self {
            model: model.to_owned(),
            started: false,
            index: 0,
            open: None,
            output_tokens: 0,
            stop: "end_turn",
        }
    }

    /// `message_start`, before the first event of the answer.
    fn start(&mut self) -> String {
        if self.started {
            return String::new();
        }
        self.started = true;
        event(&json!({
            "type": "message_start",
            "message": {
                "id": format!("msg_{}", uuid::Uuid::new_v4().simple()), "type": "message", "role": "assistant",
                "model": self.model, "content": [], "stop_reason": null,
                "usage": { "input_tokens": 0, "output_tokens": 0 },
            },
        }))
    }

    /// Closes the open block, if any.
    fn close(&mut self) -> String {
        match self.open.take() {
            Some(_) => {
                let stop = event(&json!({ "type": "content_block_stop", "index": self.index }));
                self.index += 1;
                stop
            }
            None => String::new(),
        }
    }

    /// A delta of `kind`, opening its block first when another is open.
    fn delta(&mut self, kind: Open, text: &str) -> String {
        let mut out = self.start();
        if self.open != Some(kind) {
            out.push_str(&self.close());
            let block = match kind {
                Open::Text => json!({ "type": "text", "text": "" }),
                Open::Thinking => json!({ "type": "thinking", "thinking": "" }),
            };
            out.push_str(&event(
                &json!({ "type": "content_block_start", "index": self.index, "content_block": block }),
            ));
            self.open = Some(kind);
        }
        let delta = match kind {
            Open::Text => json!({ "type": "text_delta", "text": text }),
            Open::Thinking => json!({ "type": "thinking_delta", "thinking": text }),
        };
        out.push_str(&event(&json!({ "type": "content_block_delta", "index": self.index, "delta": delta })));
        out
    }

    pub(super) fn event(&mut self, model_event: &ModelEvent) -> String {
        match model_event {
            ModelEvent::TextDelta { text } => self.delta(Open::Text, text),
            ModelEvent::ThoughtDelta { text } => self.delta(Open::Thinking, text),
            ModelEvent::ToolCall { call } => {
                let mut out = self.start();
                out.push_str(&self.close());
                let block = json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": {} });
                out.push_str(&event(
                    &json!({ "type": "content_block_start", "index": self.index, "content_block": block }),
                ));
                let delta = json!({ "type": "input_json_delta", "partial_json": call.arguments });
                out.push_str(&event(
                    &json!({ "type": "content_block_delta", "index": self.index, "delta": delta }),
                ));
                out.push_str(&event(&json!({ "type": "content_block_stop", "index": self.index })));
                self.index += 1;
                out
            }
            ModelEvent::Usage { usage } => {
                self.output_tokens = usage.output_tokens;
                String::new()
            }
            ModelEvent::Finish { reason } => {
                self.stop = match reason {
                    FinishReason::Stop => "end_turn",
                    FinishReason::ToolCalls => "tool_use",
                    FinishReason::Length => "max_tokens",
                    FinishReason::Refusal => "refusal",
                };
                String::new()
            }
            ModelEvent::Attempt { .. }
            | ModelEvent::Retrying { .. }
            | ModelEvent::ReasoningDetails { .. } => String::new(),
        }
    }

    /// A script's `error` step, as Anthropic sends an error inside the stream.
    pub(super) fn error(&mut self, error: &ProviderError) -> String {
        self.started = true;
        event(&json!({ "type": "error", "error": { "type": "api_error", "message": error.to_string() } }))
    }

    pub(super) fn end(&mut self) -> String {
        let mut out = self.start();
        out.push_str(&self.close());
        out.push_str(&event(&json!({
            "type": "message_delta",
            "delta": { "stop_reason": self.stop, "stop_sequence": null },
            "usage": { "output_tokens": self.output_tokens },
        })));
        out.push_str(&event(&json!({ "type": "message_stop" })));
        out
    }
}
