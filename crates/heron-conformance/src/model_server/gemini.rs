//! The model server's answer as Google's Gemini API gives it: `GenerateContentResponse`
//! records (`candidates[0].content.parts`: text, thoughts as text parts marked `thought`,
//! each tool call whole as a `functionCall`), the finish reason and `usageMetadata` on the
//! last. `:streamGenerateContent?alt=sse` streams them as `data:` events;
//! `:streamGenerateContent` without it answers them as one JSON array; `:generateContent`
//! answers one record holding the whole answer.

use heron_core::llm::{FinishReason, ModelEvent, ProviderError};
use serde_json::{Value, json};

/// How the records go out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// Each record as a server-sent event, as it comes.
    Events,
    /// The records as one JSON array, at the end.
    Array,
    /// One record with every part, at the end.
    Whole,
}

/// One answer's records.
pub(super) struct Records {
    model: String,
    framing: Framing,
    /// What is kept for the end (every framing but `Events`).
    kept: Vec<Value>,
    /// Usage seen before the finish, which carries it.
    usage: Option<Value>,
}

impl Records {
    pub(super) fn new(model: &str, framing: Framing) -> Self {
        Self { model: model.to_owned(), framing, kept: Vec::new(), usage: None }
    }

    /// What goes out now for `record`: the event itself, or nothing until the end.
    fn out(&mut self, record: Value) -> String {
        match self.framing {
            Framing::Events => super::data(&record),
            Framing::Array | Framing::Whole => {
                self.kept.push(record);
                String::new()
            }
        }
    }

    fn record(&self, parts: Vec<Value>, finish: Option<&str>) -> Value {
        let mut candidate = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        json!({ "candidates": [candidate], "modelVersion": self.model })
    }

    pub(super) fn event(&mut self, event: &ModelEvent) -> String {
        let record = match event {
            ModelEvent::TextDelta { text } => self.record(vec![json!({ "text": text })], None),
            ModelEvent::ThoughtDelta { text } => {
                self.record(vec![json!({ "text": text, "thought": true })], None)
            }
            ModelEvent::ToolCall { call } => {
                // Gemini gives arguments as an object; text that is not one goes as it is.
                let args = serde_json::from_str::<Value>(&call.arguments)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({ "arguments": call.arguments }));
                self.record(vec![json!({ "functionCall": { "name": call.name, "args": args } })], None)
            }
            ModelEvent::Usage { usage } => {
                self.usage = Some(json!({
                    "promptTokenCount": usage.input_tokens,
                    "candidatesTokenCount": usage.output_tokens,
                    "totalTokenCount": usage.input_tokens + usage.output_tokens,
                }));
                return String::new();
            }
            ModelEvent::Finish { reason } => {
                let finish = match reason {
                    // A reply with function calls ends `STOP` too.
                    FinishReason::Stop | FinishReason::ToolCalls => "STOP",
                    FinishReason::Length => "MAX_TOKENS",
                    FinishReason::Refusal => "SAFETY",
                };
                let mut record = self.record(Vec::new(), Some(finish));
                if let Some(usage) = self.usage.take() {
                    record["usageMetadata"] = usage;
                }
                record
            }
            ModelEvent::Attempt { .. }
            | ModelEvent::Retrying { .. }
            | ModelEvent::ReasoningDetails { .. } => {
                return String::new();
            }
        };
        self.out(record)
    }

    /// A script's `error` step, as Google reports an error.
    pub(super) fn error(&mut self, error: &ProviderError) -> String {
        let error = json!({ "error": { "code": 500, "message": error.to_string(), "status": "INTERNAL" } });
        self.out(error)
    }

    /// What ends the answer: usage seen after the finish, or every record kept.
    pub(super) fn end(&mut self) -> String {
        if let Some(usage) = self.usage.take() {
            let mut record = self.record(Vec::new(), None);
            record["usageMetadata"] = usage;
            let out = self.out(record);
            if !out.is_empty() {
                return out;
            }
        }
        match self.framing {
            Framing::Events => String::new(),
            Framing::Array => Value::Array(std::mem::take(&mut self.kept)).to_string(),
            Framing::Whole => whole(std::mem::take(&mut self.kept), &self.model).to_string(),
        }
    }
}

/// The records of one answer as one: every part in order (runs of text, and of thought,
/// joined), the last finish reason and usage; an error record stands alone.
fn whole(records: Vec<Value>, model: &str) -> Value {
    if let Some(error) = records.iter().find(|r| r.get("error").is_some()) {
        return error.clone();
    }
    let mut parts: Vec<Value> = Vec::new();
    let (mut finish, mut usage) = (None, None);
    for record in records {
        if let Some(found) = record.get("usageMetadata") {
            usage = Some(found.clone());
        }
        let Some(candidate) = record["candidates"].get(0) else { continue };
        if let Some(found) = candidate.get("finishReason") {
            finish = Some(found.clone());
        }
        for part in candidate["content"]["parts"].as_array().into_iter().flatten() {
            let joins = |last: &Value| {
                last.get("text").is_some()
                    && part.get("text").is_some()
                    && last.get("thought") == part.get("thought")
            };
            match parts.last_mut() {
                Some(last) if joins(last) => {
                    let text = format!(
                        "{}{}",
                        last["text"].as_str().unwrap_or_default(),
                        part["text"].as_str().unwrap_or_default()
                    );
                    last["text"] = json!(text);
                }
                _ => parts.push(part.clone()),
            }
        }
    }
    let mut candidate = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
    if let Some(finish) = finish {
        candidate["finishReason"] = finish;
    }
    let mut out = json!({ "candidates": [candidate], "modelVersion": model });
    if let Some(usage) = usage {
        out["usageMetadata"] = usage;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use heron_core::llm::ToolCallRequest;
    use heron_core::types::Usage;

    fn played(framing: Framing) -> (Vec<String>, String) {
        let mut records = Records::new("scripted", framing);
        let call = ToolCallRequest {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a"}"#.into(),
        };
        let events = [
            ModelEvent::ThoughtDelta { text: "Hm".into() },
            ModelEvent::TextDelta { text: "Read".into() },
            ModelEvent::TextDelta { text: "ing.".into() },
            ModelEvent::ToolCall { call },
            ModelEvent::Usage { usage: Usage { input_tokens: 10, output_tokens: 3, ..Usage::default() } },
            ModelEvent::Finish { reason: FinishReason::ToolCalls },
        ];
        let now = events.iter().map(|e| records.event(e)).filter(|s| !s.is_empty()).collect();
        (now, records.end())
    }

    #[test]
    fn events_stream_each_record_and_the_finish_carries_usage() {
        let (now, end) = played(Framing::Events);
        assert_eq!(now.len(), 5, "{now:#?}");
        assert!(end.is_empty());
        let last: Value = serde_json::from_str(now[4].trim().trim_start_matches("data: ")).expect("JSON");
        assert_eq!(last["candidates"][0]["finishReason"], "STOP");
        assert_eq!(last["usageMetadata"]["totalTokenCount"], 13);
        let call: Value = serde_json::from_str(now[3].trim().trim_start_matches("data: ")).expect("JSON");
        assert_eq!(call["candidates"][0]["content"]["parts"][0]["functionCall"]["args"]["path"], "a");
    }

    #[test]
    fn an_array_holds_the_records_and_a_whole_answer_joins_them() {
        let (now, end) = played(Framing::Array);
        assert!(now.is_empty());
        let array: Value = serde_json::from_str(&end).expect("JSON");
        assert_eq!(array.as_array().map(Vec::len), Some(5));
        let (_, end) = played(Framing::Whole);
        let whole: Value = serde_json::from_str(&end).expect("JSON");
        let parts = &whole["candidates"][0]["content"]["parts"];
        assert_eq!(parts[0], json!({ "text": "Hm", "thought": true }));
        assert_eq!(parts[1], json!({ "text": "Reading." }));
        assert_eq!(parts[2]["functionCall"]["name"], "read_file");
        assert_eq!(whole["usageMetadata"]["promptTokenCount"], 10);
    }
}
