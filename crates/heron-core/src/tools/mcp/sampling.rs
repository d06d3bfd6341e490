//! A server's `sampling/createMessage`, as Heron takes it: checked and bounded here, then
//! answered by whatever the session attached as its [`Sampler`] (the session's model, after
//! the user's approval). Until a session attaches one, and for anything Heron does not
//! offer (images and audio, tools, more than [`MAX_MESSAGES`] messages or [`MAX_BYTES`] of
//! text), the request is refused with a reason the server can show. A request asks for at
//! most [`MAX_TOKENS`] tokens whatever it says.

#![expect(
    deprecated,
    reason = "sampling is in the MCP revisions servers speak today (2025-06-18, 2025-11-25)"
)]

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::ErrorData;
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult};
use serde_json::{Value, json};

use crate::BoxFuture;

/// The most tokens one sampling request may have the model write.
pub const MAX_TOKENS: u32 = 4096;
/// The most messages one request may carry.
const MAX_MESSAGES: usize = 64;
/// The most text one request may carry, in bytes, system prompt included.
const MAX_BYTES: usize = 256 * 1024;

/// Who said a message of a sampling request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampledRole {
    /// The user (as the server puts it).
    User,
    /// The model (as the server puts it).
    Assistant,
}

/// One message of a sampling request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampledMessage {
    /// Who said it.
    pub role: SampledRole,
    /// What was said.
    pub text: String,
}

/// A server's request for the session's model to write a message, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingAsk {
    /// The server's name.
    pub server: String,
    /// The system prompt the server asks for, if any.
    pub system: Option<String>,
    /// The conversation.
    pub messages: Vec<SampledMessage>,
    /// The most tokens the answer may take (at most [`MAX_TOKENS`]).
    pub max_tokens: u32,
}

/// What the model wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampled {
    /// The text.
    pub text: String,
    /// The model, as `provider/model`.
    pub model: String,
    /// Whether it stopped at the token cap.
    pub cut: bool,
}

/// Answers sampling requests for a session.
pub trait Sampler: Send + Sync {
    /// The model's answer to `ask`, or why there is none (the user declined, the session's
    /// posture cannot ask, the model failed): a sentence the server may show.
    fn sample(&self, ask: SamplingAsk) -> BoxFuture<Result<Sampled, String>>;
}

/// The sampler a session's servers reach, once the session attached one.
#[derive(Clone, Default)]
pub(crate) struct SamplerSlot(Arc<Mutex<Option<Arc<dyn Sampler>>>>);

impl SamplerSlot {
    pub(super) fn set(&self, sampler: Arc<dyn Sampler>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(sampler);
    }

    fn get(&self) -> Option<Arc<dyn Sampler>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The MCP error a refused request answers (-1, as the spec's example of a user's refusal).
fn refused(why: impl Into<String>) -> ErrorData {
    ErrorData::new(rmcp::model::ErrorCode(-1), why.into(), None)
}

/// Answers `request` from `server` through `slot`.
pub(super) async fn answer(
    slot: &SamplerSlot,
    server: &str,
    request: &CreateMessageRequestParams,
) -> Result<CreateMessageResult, ErrorData> {
    let ask = checked(server, request).map_err(|why| refused(format!("Heron does not offer this: {why}")))?;
    let sampler = slot.get().ok_or_else(|| refused("no session is open to answer sampling requests"))?;
    let sampled = sampler.sample(ask).await.map_err(refused)?;
    let result = json!({
        "role": "assistant",
        "content": { "type": "text", "text": sampled.text },
        "model": sampled.model,
        "stopReason": if sampled.cut { "maxTokens" } else { "endTurn" },
    });
    serde_json::from_value(result).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// The request as Heron offers it, or why it is refused.
fn checked(server: &str, request: &CreateMessageRequestParams) -> Result<SamplingAsk, String> {
    let value = serde_json::to_value(request).map_err(|e| e.to_string())?;
    if value.get("tools").is_some_and(|tools| !tools.is_null()) {
        return Err("tools in a sampling request".into());
    }
    let listed = value["messages"].as_array().cloned().unwrap_or_default();
    if listed.is_empty() || listed.len() > MAX_MESSAGES {
        return Err(format!("a request of {} messages (1 to {MAX_MESSAGES} are taken)", listed.len()));
    }
    let system = value["systemPrompt"].as_str().map(str::to_owned).filter(|s| !s.trim().is_empty());
    let mut bytes = system.as_ref().map_or(0, String::len);
    let mut messages = Vec::new();
    for message in &listed {
        let role = match message["role"].as_str() {
            Some("user") => SampledRole::User,
            Some("assistant") => SampledRole::Assistant,
            _ => return Err("a message with an unknown role".into()),
        };
        let text = text_of(&message["content"])?;
        bytes += text.len();
        if bytes > MAX_BYTES {
            return Err(format!("more than {} KiB of text", MAX_BYTES / 1024));
        }
        messages.push(SampledMessage { role, text });
    }
    let asked = value["maxTokens"].as_u64().unwrap_or(u64::from(MAX_TOKENS));
    let max_tokens = u32::try_from(asked).unwrap_or(MAX_TOKENS).clamp(1, MAX_TOKENS);
    Ok(SamplingAsk { server: server.to_owned(), system, messages, max_tokens })
}

/// The text of a message's content: one text block, or a list of text blocks.
fn text_of(content: &Value) -> Result<String, String> {
    let blocks: Vec<&Value> = match content {
        Value::Array(blocks) => blocks.iter().collect(),
        block => vec![block],
    };
    let mut text = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => text.push(block["text"].as_str().unwrap_or_default().to_owned()),
            Some(other) => {
                return Err(format!(
                    "`{}` content (only text is taken)",
                    other.chars().take(32).collect::<String>()
                ));
            }
            None => return Err("content without a type".into()),
        }
    }
    Ok(text.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(value: Value) -> CreateMessageRequestParams {
        serde_json::from_value(value).expect("a sampling request")
    }

    #[test]
    fn text_requests_are_taken_and_capped_in_tokens() {
        let ask = checked(
            "everything",
            &request(json!({
                "messages": [{ "role": "user", "content": { "type": "text", "text": "Hi" } }],
                "systemPrompt": "Be brief.", "maxTokens": 1_000_000,
            })),
        )
        .expect("taken");
        assert_eq!(ask.max_tokens, MAX_TOKENS);
        assert_eq!(ask.system.as_deref(), Some("Be brief."));
        assert_eq!(ask.messages, [SampledMessage { role: SampledRole::User, text: "Hi".into() }]);
    }

    #[test]
    fn what_heron_does_not_offer_is_refused() {
        let image = json!({ "messages": [{ "role": "user", "content": { "type": "image", "data": "AA", "mimeType": "image/png" } }], "maxTokens": 10 });
        assert!(checked("s", &request(image)).is_err());
        let huge = "x".repeat(MAX_BYTES + 1);
        let long = json!({ "messages": [{ "role": "user", "content": { "type": "text", "text": huge } }], "maxTokens": 10 });
        assert!(checked("s", &request(long)).is_err());
        let none = json!({ "messages": [], "maxTokens": 10 });
        assert!(checked("s", &request(none)).is_err());
    }
}
