//! The model server's answer as OpenAI's Responses API streams it: `response.created`, then
//! one output item per run of text, of reasoning or per tool call (each `output_item.added`,
//! filled by its deltas, then `output_item.done` whole), then `response.completed` with the
//! usage. Every event carries its `sequence_number`.

use heron_core::llm::{FinishReason, ModelEvent, ProviderError};
use serde_json::{Value, json};

/// The kind of the output item open now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Message,
    Reasoning,
}

/// One answer's events.
pub(super) struct Events {
    id: String,
    model: String,
    sequence: u64,
    started: bool,
    /// The items done so far, for `response.completed`.
    output: Vec<Value>,
    open: Option<(Open, String, String)>,
    usage: Value,
    incomplete: bool,
}

impl Events {
    pub(super) fn new(model: &str) -> Self {
        Self {
            id: format!("resp_{}", uuid::Uuid::new_v4().simple()),
            model: model.to_owned(),
            sequence: 0,
            started: false,
            output: Vec::new(),
            open: None,
            usage: json!({ "input_tokens": 0, "output_tokens": 0, "total_tokens": 0 }),
            incomplete: false,
        }
    }

    /// One event, named by its type as OpenAI names them.
    fn event(&mut self, mut value: Value) -> String {
        value["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        format!("event: {}\ndata: {value}\n\n", value["type"].as_str().unwrap_or("message"))
    }

    fn response(&self, status: &str) -> Value {
        json!({
            "id": self.id, "object": "response", "model": self.model, "status": status,
            "output": self.output, "usage": self.usage,
        })
    }

    fn start(&mut self) -> String {
        if self.started {
            return String::new();
        }
        self.started = true;
        let response = self.response("in_progress");
        self.event(json!({ "type": "response.created", "response": response }))
    }

    /// Ends the open item, if any.
    fn close(&mut self) -> String {
        let Some((open, id, text)) = self.open.take() else { return String::new() };
        let item = match open {
            Open::Message => json!({
                "type": "message", "id": id, "role": "assistant", "status": "completed",
                "content": [{ "type": "output_text", "text": text, "annotations": [] }],
            }),
            Open::Reasoning => json!({
                "type": "reasoning", "id": id, "summary": [{ "type": "summary_text", "text": text }],
            }),
        };
        let index = self.output.len();
        self.output.push(item.clone());
        self.event(json!({ "type": "response.output_item.done", "output_index": index, "item": item }))
    }

    /// Opens an item of `kind` unless one is open; the events that took.
    fn open(&mut self, kind: Open) -> String {
        if self.open.as_ref().is_some_and(|(open, _, _)| *open == kind) {
            return String::new();
        }
        let mut out = self.close();
        let (prefix, item) = match kind {
            Open::Message => (
                "msg",
                json!({ "type": "message", "role": "assistant", "status": "in_progress", "content": [] }),
            ),
            Open::Reasoning => ("rs", json!({ "type": "reasoning", "summary": [] })),
        };
        let id = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let mut item = item;
        item["id"] = json!(id);
        let index = self.output.len();
        out +=
            &self.event(json!({ "type": "response.output_item.added", "output_index": index, "item": item }));
        if kind == Open::Message {
            let part = json!({ "type": "output_text", "text": "", "annotations": [] });
            out += &self.event(json!({
                "type": "response.content_part.added", "item_id": id, "output_index": index, "content_index": 0, "part": part,
            }));
        }
        self.open = Some((kind, id, String::new()));
        out
    }

    pub(super) fn event_of(&mut self, event: &ModelEvent) -> String {
        let mut out = self.start();
        match event {
            ModelEvent::TextDelta { text } | ModelEvent::ThoughtDelta { text } => {
                let kind = if matches!(event, ModelEvent::TextDelta { .. }) {
                    Open::Message
                } else {
                    Open::Reasoning
                };
                out += &self.open(kind);
                let index = self.output.len();
                let Some((_, id, so_far)) = self.open.as_mut() else { return out };
                so_far.push_str(text);
                let id = id.clone();
                let delta = match kind {
                    Open::Message => json!({
                        "type": "response.output_text.delta", "item_id": id, "output_index": index, "content_index": 0, "delta": text,
                    }),
                    Open::Reasoning => json!({
                        "type": "response.reasoning_summary_text.delta", "item_id": id, "output_index": index, "summary_index": 0, "delta": text,
                    }),
                };
                out += &self.event(delta);
            }
            ModelEvent::ToolCall { call } => {
                out += &self.close();
                let index = self.output.len();
                let id = format!("fc_{}", uuid::Uuid::new_v4().simple());
                let item = |arguments: &str, status: &str| {
                    json!({
                        "type": "function_call", "id": id, "call_id": call.id, "name": call.name,
                        "arguments": arguments, "status": status,
                    })
                };
                out += &self.event(json!({ "type": "response.output_item.added", "output_index": index, "item": item("", "in_progress") }));
                out += &self.event(json!({
                    "type": "response.function_call_arguments.delta", "item_id": id, "output_index": index, "delta": call.arguments,
                }));
                out += &self.event(json!({
                    "type": "response.function_call_arguments.done", "item_id": id, "output_index": index, "arguments": call.arguments,
                }));
                let done = item(&call.arguments, "completed");
                self.output.push(done.clone());
                out += &self.event(
                    json!({ "type": "response.output_item.done", "output_index": index, "item": done }),
                );
            }
            ModelEvent::Usage { usage } => {
                self.usage = json!({
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "total_tokens": usage.input_tokens + usage.output_tokens,
                });
            }
            ModelEvent::Finish { reason } => self.incomplete = *reason == FinishReason::Length,
            ModelEvent::Attempt { .. }
            | ModelEvent::Retrying { .. }
            | ModelEvent::ReasoningDetails { .. } => {}
        }
        out
    }

    /// A script's `error` step, as `response.failed`.
    pub(super) fn error(&mut self, error: &ProviderError) -> String {
        let mut out = self.start();
        let mut response = self.response("failed");
        response["error"] = json!({ "code": "server_error", "message": error.to_string() });
        out += &self.event(json!({ "type": "response.failed", "response": response }));
        out
    }

    pub(super) fn end(&mut self) -> String {
        let mut out = self.start();
        out += &self.close();
        let (kind, status) = if self.incomplete {
            ("response.incomplete", "incomplete")
        } else {
            ("response.completed", "completed")
        };
        let response = self.response(status);
        out += &self.event(json!({ "type": kind, "response": response }));
        out
    }
}

/// How many replies of the model a Responses `input` holds: each run of its output items
/// (assistant messages, reasoning, function calls) counts once.
pub(super) fn replies(input: &[Value]) -> usize {
    let mut replies = 0;
    let mut in_reply = false;
    for item in input {
        let kind = item["type"].as_str().unwrap_or("message");
        let from_model = matches!(kind, "function_call" | "reasoning")
            || (kind == "message" && item["role"] == "assistant");
        if from_model && !in_reply {
            replies += 1;
        }
        in_reply = from_model;
    }
    replies
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_core::llm::ToolCallRequest;

    fn parsed(events: &str) -> Vec<Value> {
        events
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .map(|data| serde_json::from_str(data).expect("JSON"))
            .collect()
    }

    #[test]
    fn text_reasoning_and_a_call_are_items_and_the_response_completes_with_all_of_them() {
        let mut events = Events::new("scripted");
        let call = ToolCallRequest {
            id: "call_1".into(),
            name: "shell".into(),
            arguments: r#"{"cmd":"ls"}"#.into(),
        };
        let mut out = String::new();
        for event in [
            ModelEvent::ThoughtDelta { text: "Hm".into() },
            ModelEvent::TextDelta { text: "Look".into() },
            ModelEvent::TextDelta { text: "ing.".into() },
            ModelEvent::ToolCall { call },
            ModelEvent::Finish { reason: FinishReason::ToolCalls },
        ] {
            out += &events.event_of(&event);
        }
        out += &events.end();
        let all = parsed(&out);
        assert_eq!(all[0]["type"], "response.created");
        let last = all.last().expect("an end");
        assert_eq!(last["type"], "response.completed");
        let output = last["response"]["output"].as_array().expect("output");
        let kinds: Vec<&str> = output.iter().filter_map(|i| i["type"].as_str()).collect();
        assert_eq!(kinds, ["reasoning", "message", "function_call"]);
        assert_eq!(output[1]["content"][0]["text"], "Looking.");
        assert_eq!(output[2]["call_id"], "call_1");
        let numbers: Vec<u64> = all.iter().filter_map(|e| e["sequence_number"].as_u64()).collect();
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    }

    #[test]
    fn each_run_of_the_models_items_is_one_reply() {
        let input = serde_json::json!([
            { "type": "message", "role": "user", "content": "hi" },
            { "type": "reasoning", "summary": [] },
            { "type": "function_call", "call_id": "a", "name": "x", "arguments": "{}" },
            { "type": "function_call_output", "call_id": "a", "output": "ok" },
            { "type": "message", "role": "assistant", "content": [] },
            { "type": "message", "role": "user", "content": "more" },
        ]);
        assert_eq!(replies(input.as_array().expect("a list")), 2);
    }
}
