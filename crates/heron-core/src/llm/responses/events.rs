//! Folds the typed stream events of one Responses API answer into [`ModelEvent`]s: text and
//! reasoning text as they come, each function call whole when its item is done, reasoning
//! items kept whole so they can be replayed, and usage and the finish reason from the
//! terminal event. Pure data handling; no I/O, so every event is testable in isolation.
//!
//! Every error the server reports in the stream (an `error` event, `response.failed`) fails
//! the turn with the server's own message (the caller redacts and clips it). Event types not
//! named here are ignored: OpenAI adds new ones, and a new kind of progress report must not
//! break turns that never asked for it.

use serde::Deserialize;
use serde_json::Value;

use crate::llm::http::{Fold, Progress};
use crate::llm::sse::Payload;
use crate::llm::{FinishReason, ModelEvent, ProviderError, ToolCallRequest, Usage, tool_identity};

/// The most function calls one response may make; a stream past it is malformed.
const MAX_TOOL_CALLS: usize = 256;

/// The most bytes of reasoning items kept; past it none is kept, since a chain of
/// reasoning with a piece missing is worse than none.
const MAX_REASONING_BYTES: usize = 8 * 1024 * 1024;

/// One `data:` payload, by its `type`. Fields absent or `null` are `None`: servers that
/// speak this API besides OpenAI's differ in what they leave out.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Event {
    #[serde(rename = "response.output_item.added")]
    ItemAdded { item: Option<Value>, output_index: Option<u64> },
    #[serde(rename = "response.output_item.done")]
    ItemDone { item: Option<Value>, output_index: Option<u64> },
    #[serde(rename = "response.output_text.delta")]
    TextDelta { delta: Option<String> },
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta { delta: Option<String> },
    #[serde(rename = "response.reasoning_summary_text.delta")]
    SummaryDelta { item_id: Option<String>, summary_index: Option<u64>, delta: Option<String> },
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningDelta { item_id: Option<String>, content_index: Option<u64>, delta: Option<String> },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta { item_id: Option<String>, output_index: Option<u64>, delta: Option<String> },
    #[serde(rename = "response.function_call_arguments.done")]
    ArgumentsDone { item_id: Option<String>, output_index: Option<u64>, arguments: Option<String> },
    #[serde(rename = "response.completed")]
    Completed { response: Option<WireResponse> },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Option<WireResponse> },
    #[serde(rename = "response.failed")]
    Failed { response: Option<WireResponse> },
    #[serde(rename = "error")]
    Error,
    /// `response.created`, `response.in_progress`, the `.done` events of text, and every
    /// type this fold does not know.
    #[serde(other)]
    Other,
}

/// The response object of a terminal event, as far as it is read.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireResponse {
    usage: Option<WireUsage>,
    incomplete_details: Option<IncompleteDetails>,
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct IncompleteDetails {
    reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct InputDetails {
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(wire: WireUsage) -> Self {
        Usage {
            input_tokens: wire.input_tokens.unwrap_or(0),
            output_tokens: wire.output_tokens.unwrap_or(0),
            cached_input_tokens: wire.input_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0),
            cache_write_input_tokens: 0,
            reasoning_tokens: wire.output_tokens_details.and_then(|d| d.reasoning_tokens).unwrap_or(0),
        }
    }
}

/// A `function_call` output item as far as it is read.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireCall {
    id: Option<String>,
    call_id: Option<String>,
    name: Option<String>,
    /// Whole in `output_item.done`; empty or absent in `output_item.added`.
    arguments: Option<String>,
}

/// A function call whose pieces are still arriving, known by its item id and its position
/// in the output (deltas carry both; either may be missing on other servers).
#[derive(Debug, Default)]
struct PartialCall {
    item_id: Option<String>,
    output_index: Option<u64>,
    call_id: String,
    name: String,
    arguments: String,
    /// Whether it went out; later events for it are ignored.
    emitted: bool,
}

impl PartialCall {
    /// Appends a piece of arguments. Past the cap, one byte more is kept: enough for the
    /// turn to refuse the call without holding what a runaway model keeps sending.
    fn push_arguments(&mut self, piece: &str) {
        crate::llm::push_arguments(&mut self.arguments, piece);
    }

    /// Replaces what the deltas built with the whole arguments a `.done` event carries,
    /// which are what the model produced even if a delta went missing.
    fn set_arguments(&mut self, whole: &str) {
        self.arguments.clear();
        self.push_arguments(whole);
    }

    fn fill(&mut self, wire: WireCall) {
        if let Some(id) = wire.id.filter(|id| !id.is_empty()) {
            self.item_id = Some(id);
        }
        if let Some(call_id) = wire.call_id.filter(|id| !id.is_empty()) {
            self.call_id = call_id;
        }
        if let Some(name) = wire.name.filter(|name| !name.is_empty()) {
            self.name = name;
        }
    }
}

/// How the response ended, once its terminal event arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Completed,
    /// `response.incomplete`, with the finish reason its reason means.
    Incomplete(FinishReason),
}

/// Folds the events of one streamed response into [`ModelEvent`]s. Text and reasoning text
/// go out as they come; each call goes out when its item is done; reasoning items, usage
/// and `Finish` go out last, from [`Fold::finish`].
#[derive(Debug, Default)]
pub(crate) struct EventAssembler {
    /// Calls in the order they began, emitted ones included (they count toward the cap).
    calls: Vec<PartialCall>,
    calls_made: usize,
    /// Done reasoning items, whole, for the next request to replay.
    reasoning: Vec<Value>,
    reasoning_bytes: usize,
    /// The reasoning part the last thought text belonged to: a new part starts a paragraph.
    thought_part: Option<(Option<String>, Option<u64>)>,
    refused: bool,
    usage: Option<Usage>,
    end: Option<End>,
}

impl EventAssembler {
    /// Folds in one `data:` payload, pushing the events it completes onto `out`.
    fn push(&mut self, data: &str, out: &mut Vec<ModelEvent>) -> Result<Progress, ProviderError> {
        let data = data.trim();
        // Some compatible servers end with Chat Completions' marker or send empty keep-alives.
        if data == "[DONE]" {
            return Ok(Progress::Done);
        }
        if data.is_empty() {
            return Ok(Progress::More);
        }
        let event: Event = serde_json::from_str(data).map_err(|error| {
            ProviderError::Protocol(format!("a stream event is not the expected JSON ({error})"))
        })?;
        match event {
            Event::ItemAdded { item, output_index } => self.item_added(item, output_index)?,
            Event::ItemDone { item, output_index } => self.item_done(item, output_index, out)?,
            Event::TextDelta { delta } => {
                if let Some(text) = delta.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta { text });
                }
            }
            Event::RefusalDelta { delta } => {
                // The refusal is what the model says instead of an answer, so it is shown.
                self.refused = true;
                if let Some(text) = delta.filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta { text });
                }
            }
            Event::SummaryDelta { item_id, summary_index: part, delta }
            | Event::ReasoningDelta { item_id, content_index: part, delta } => {
                self.thought(item_id, part, delta, out)
            }
            Event::ArgumentsDelta { item_id, output_index, delta } => {
                let at = self.call_at(item_id, output_index)?;
                if let Some(delta) = delta {
                    let call = &mut self.calls[at];
                    if !call.emitted {
                        call.push_arguments(&delta);
                    }
                }
            }
            Event::ArgumentsDone { item_id, output_index, arguments } => {
                let at = self.call_at(item_id, output_index)?;
                if let Some(arguments) = arguments {
                    let call = &mut self.calls[at];
                    if !call.emitted {
                        call.set_arguments(&arguments);
                    }
                }
            }
            Event::Completed { response } => {
                self.take_usage(response.unwrap_or_default());
                self.end = Some(End::Completed);
                return Ok(Progress::Done);
            }
            Event::Incomplete { response } => {
                let response = response.unwrap_or_default();
                let reason = match response.incomplete_details.as_ref().and_then(|d| d.reason.as_deref()) {
                    Some("content_filter") => FinishReason::Refusal,
                    // `max_output_tokens`, and any other reason: the answer was cut short.
                    _ => FinishReason::Length,
                };
                self.take_usage(response);
                self.end = Some(End::Incomplete(reason));
                return Ok(Progress::Done);
            }
            Event::Failed { response } => {
                let error = response.and_then(|r| r.error).filter(|e| !e.is_null());
                return Err(match error {
                    Some(error) => server_error(&error),
                    None => ProviderError::Status { status: 502, message: "the response failed".into() },
                });
            }
            Event::Error => return Err(error_event(data)),
            Event::Other => {}
        }
        Ok(Progress::More)
    }

    fn item_added(&mut self, item: Option<Value>, output_index: Option<u64>) -> Result<(), ProviderError> {
        // A reasoning item is only kept once done, when it is whole; a message needs
        // nothing until its text arrives.
        let Some(item) = item.filter(is_function_call) else { return Ok(()) };
        let wire = call_of(item)?;
        let at = self.call_at(wire.id.clone(), output_index)?;
        self.calls[at].fill(wire);
        Ok(())
    }

    fn item_done(
        &mut self,
        item: Option<Value>,
        output_index: Option<u64>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ProviderError> {
        let Some(item) = item else { return Ok(()) };
        match item.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                let mut wire = call_of(item)?;
                let arguments = wire.arguments.take();
                let at = self.call_at(wire.id.clone(), output_index)?;
                let call = &mut self.calls[at];
                if call.emitted {
                    return Ok(());
                }
                call.fill(wire);
                if let Some(arguments) = arguments.filter(|a| !a.is_empty()) {
                    call.set_arguments(&arguments);
                }
                self.emit(at, out);
            }
            Some("reasoning") => self.keep_reasoning(item),
            _ => {}
        }
        Ok(())
    }

    /// A thought piece, after a paragraph break when it starts a new reasoning part (each
    /// summary part is a paragraph of its own and would otherwise run into the last).
    fn thought(
        &mut self,
        item_id: Option<String>,
        part: Option<u64>,
        delta: Option<String>,
        out: &mut Vec<ModelEvent>,
    ) {
        let Some(text) = delta.filter(|t| !t.is_empty()) else { return };
        let here = (item_id, part);
        let text = match &self.thought_part {
            Some(last) if *last != here => format!("\n\n{text}"),
            _ => text,
        };
        self.thought_part = Some(here);
        out.push(ModelEvent::ThoughtDelta { text });
    }

    /// Keeps a done reasoning item whole, within the budget.
    fn keep_reasoning(&mut self, item: Value) {
        if self.reasoning_bytes > MAX_REASONING_BYTES {
            return;
        }
        self.reasoning_bytes += item.to_string().len();
        if self.reasoning_bytes > MAX_REASONING_BYTES {
            self.reasoning.clear();
            return;
        }
        self.reasoning.push(item);
    }

    /// The call an event is about, by item id first and output position second; a new one
    /// when neither is known yet.
    fn call_at(
        &mut self,
        item_id: Option<String>,
        output_index: Option<u64>,
    ) -> Result<usize, ProviderError> {
        let item_id = item_id.filter(|id| !id.is_empty());
        let by_id =
            item_id.as_ref().and_then(|id| self.calls.iter().position(|c| c.item_id.as_ref() == Some(id)));
        let by_index =
            || output_index.and_then(|i| self.calls.iter().position(|c| c.output_index == Some(i)));
        if let Some(at) = by_id.or_else(by_index) {
            return Ok(at);
        }
        if self.calls.len() >= MAX_TOOL_CALLS {
            return Err(ProviderError::Protocol(format!(
                "the model made more than {MAX_TOOL_CALLS} tool calls in one response"
            )));
        }
        self.calls.push(PartialCall { item_id, output_index, ..PartialCall::default() });
        Ok(self.calls.len() - 1)
    }

    /// Sends call `at` out, with its `call_id` as the id results are matched by.
    fn emit(&mut self, at: usize, out: &mut Vec<ModelEvent>) {
        let call = &mut self.calls[at];
        call.emitted = true;
        let id = match (call.call_id.is_empty(), &call.item_id) {
            (false, _) => call.call_id.clone(),
            // A server that names no call id still needs one to match the result by.
            (true, Some(item_id)) => item_id.clone(),
            (true, None) => format!("call_{}", uuid::Uuid::new_v4().simple()),
        };
        let arguments = std::mem::take(&mut call.arguments);
        let arguments = if arguments.trim().is_empty() { "{}".to_owned() } else { arguments };
        out.push(ModelEvent::ToolCall { call: ToolCallRequest { id, name: call.name.clone(), arguments } });
        self.calls_made += 1;
    }

    fn take_usage(&mut self, response: WireResponse) {
        if let Some(usage) = response.usage {
            self.usage = Some(usage.into());
        }
    }
}

impl Fold for EventAssembler {
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
        self.end.is_some()
    }

    /// Ends the stream: calls begun but never done (a stream cut short of their items),
    /// reasoning items, usage, then `Finish`.
    fn finish(mut self, out: &mut Vec<ModelEvent>) {
        for at in 0..self.calls.len() {
            let call = &self.calls[at];
            if !call.emitted && !call.name.is_empty() {
                self.emit(at, out);
            }
        }
        let reason = match self.end {
            _ if self.refused => FinishReason::Refusal,
            Some(End::Incomplete(reason)) => reason,
            _ if self.calls_made > 0 => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        };
        crate::llm::end_events(out, self.reasoning, self.usage, reason);
    }
}

fn is_function_call(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("function_call")
}

fn call_of(item: Value) -> Result<WireCall, ProviderError> {
    let call: WireCall = serde_json::from_value(item).map_err(|error| {
        ProviderError::Protocol(format!("a function call item is not the expected JSON ({error})"))
    })?;
    let checked = |field: &str, value: Option<String>| value.map(|v| tool_identity(field, v)).transpose();
    Ok(WireCall {
        id: checked("id", call.id)?,
        call_id: checked("id", call.call_id)?,
        name: checked("name", call.name)?,
        ..call
    })
}

/// An `error` event (`{"type":"error","code","message"}`, or its error wrapped in `error`),
/// sent as data or under `event: error`: the server's message, else its text.
fn error_event(text: &str) -> ProviderError {
    match serde_json::from_str::<Value>(text) {
        Ok(value) if value.is_object() => server_error(&value),
        Ok(Value::String(text)) => ProviderError::Status { status: 502, message: text },
        _ if text.trim().is_empty() => {
            ProviderError::Status { status: 502, message: "the server sent an error event".into() }
        }
        _ => ProviderError::Status { status: 502, message: text.trim().to_owned() },
    }
}

/// An error object's message (its code when it has none) with the status its code means.
fn server_error(error: &Value) -> ProviderError {
    let error = error.get("error").filter(|inner| inner.is_object()).unwrap_or(error);
    let code = error.get("code").filter(|code| !code.is_null());
    let message = match (error.get("message"), code) {
        (Some(Value::String(text)), _) if !text.is_empty() => text.clone(),
        (_, Some(Value::String(code))) => code.clone(),
        (_, Some(code)) => code.to_string(),
        _ => "the server reported an error without a message".to_owned(),
    };
    ProviderError::Status { status: status_of(code), message }
}

/// The HTTP status an in-stream error code stands for: rate limits and server errors keep
/// their meaning for whoever reads the status; any other failure is the upstream's (502).
fn status_of(code: Option<&Value>) -> u16 {
    let numeric = |code: u64| u16::try_from(code).ok().filter(|code| (400..600).contains(code));
    match code {
        Some(Value::String(code)) if code.starts_with("rate_limit") => 429,
        Some(Value::String(code)) if code == "server_error" => 500,
        Some(Value::String(code)) => code.parse().ok().and_then(numeric).unwrap_or(502),
        Some(Value::Number(code)) => code.as_u64().and_then(numeric).unwrap_or(502),
        _ => 502,
    }
}

#[cfg(test)]
mod tests;
